"""benchmarks/environments/lookup: the two-lookup workload's data and its MCP tool agree on every answer."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import ROOT

HERE = ROOT / "benchmarks" / "environments" / "lookup"
sys.path.insert(0, str(HERE))
from data import coins, rows  # noqa: E402


def test_every_question_names_two_crates_whose_counts_sum_to_the_solution():
    data = rows(200, seed=0)
    assert data == rows(200, seed=0) and data != rows(200, seed=1)
    for row in data:
        question = row["messages"][0]["content"]
        a, b = (w.rstrip("?") for w in question.split() if w.startswith("crate-"))
        assert a != b and row["solution"] == str(coins(a) + coins(b))
    assert {100 <= coins(f"crate-{k:04d}") <= 999 for k in range(500)} == {True}
    assert len({coins(f"crate-{k:04d}") for k in range(500)}) > 300  # not a constant the model could guess
    with pytest.raises(ValueError, match="crate-0421"):
        coins("box-12")


def call(*args: str, latency: str = "0") -> subprocess.CompletedProcess:
    env = {**os.environ, "RLFACTORY_BENCH_LATENCY": latency}
    return subprocess.run(
        [sys.executable, "-m", "swift_rlfactory.cli", "tools", "call", str(HERE / "env.yaml"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_the_mcp_tool_returns_the_count_the_references_use():
    done = call("lookup", '{"crate": "crate-0421"}', latency="0.2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == str(coins("crate-0421"))
    failed = call("lookup", '{"crate": "box-12"}')
    assert failed.returncode == 1 and "unknown crate" in failed.stdout
