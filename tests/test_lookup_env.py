"""benchmarks/environments/lookup: the two-lookup workload's data and its MCP tool agree on every answer, and
the oracle's SFT demonstrations (demos.py) are what a rollout of a model that calls the tool looks like."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from swift_rlfactory.runtime.user_code import import_target
from swift_rlfactory.tools.calls import parse_tool_calls

from .conftest import ROOT

HERE = ROOT / "benchmarks" / "environments" / "lookup"
sys.path.insert(0, str(HERE))
from data import LABEL, coins, rows  # noqa: E402


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


def test_each_demonstration_looks_up_both_crates_in_one_turn_and_answers_the_servers_sum(tmp_path):
    out = tmp_path / "sft.jsonl"
    import_target("demos.py", HERE).main(["--n", "12", "--template", "qwen2_5", "--out", str(out)])
    demos = [json.loads(line) for line in out.read_text().splitlines()]
    lookup = import_target("server.py", HERE).lookup  # the MCP tool's own function
    assert len(demos) == 12
    for demo, row in zip(demos, rows(12, seed=1), strict=True):  # seed 1: not the benchmark's questions
        system, user, calls, *tools, answer = demo["messages"]
        assert [m["role"] for m in demo["messages"]] == [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
        ]
        assert "one call per crate" in system["content"] and '"name": "lookup"' in system["content"]
        assert user == row["messages"][0]
        crates = LABEL.findall(user["content"])
        parsed = [(c.name, c.arguments, c.error) for c in parse_tool_calls(calls["content"])]
        assert parsed == [("lookup", {"crate": crate}, None) for crate in crates] and len(crates) == 2
        assert [t["content"] for t in tools] == [asyncio.run(lookup(crate)) for crate in crates]
        assert answer["content"] == f"<answer>{row['solution']}</answer>"
        assert row["solution"] == str(sum(coins(crate) for crate in crates))
