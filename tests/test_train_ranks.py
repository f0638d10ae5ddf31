"""`NPROC_PER_NODE=2 swift-rlfactory train` on CPU: train starts the two ranks under ms-swift's launcher
(torchrun, gloo), and its one run folder holds the steps and the trajectories of both. One GRPO step of the
tiny Qwen3 (about a minute on two cores)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swift_rlfactory.runs.log import read_trajectories

from .conftest import AGENT_PAIRS, ROOT, free_port

pytestmark = pytest.mark.timeout(600)
RANKS_ENV = ROOT / "tests" / "environments" / "ranks" / "env.yaml"  # its `add` fails on rank 1 only


def test_train_with_nproc_per_node_runs_both_ranks_into_one_run_folder(agent_model: Path, tmp_path: Path):
    rows = [
        {"messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "solution": str(a + b)}
        for a, b in AGENT_PAIRS
    ]
    dataset = tmp_path / "train.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    argv = [
        sys.executable, "-m", "swift_rlfactory.cli", "train", "--mode", "cpu",
        "--model", str(agent_model), "--model-type", "qwen3", "--template", "qwen3",
        "--env", str(RANKS_ENV), "--dataset", str(dataset), "--output-dir", str(tmp_path / "out"),
        "--steps", "1", "--num-generations", "2", "--batch-size", "2", "--max-turns", "3",
        "--max-completion-length", "96",
    ]  # fmt: skip
    environ = {**os.environ, "NPROC_PER_NODE": "2", "MASTER_PORT": str(free_port()), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=580)
    [run] = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    log = (run / "swift.log").read_text() if (run / "swift.log").is_file() else ""
    assert proc.returncode == 0, (proc.stdout + proc.stderr + log)[-4000:]
    assert "torch.distributed.run --nproc_per_node 2" in log  # ms-swift's launcher started the ranks
    steps = [json.loads(line) for line in (run / "logging.jsonl").read_text().splitlines()]
    assert any(step.get("global_step/max_steps") == "1/1" and "reward" in step for step in steps), steps
    records = read_trajectories(run / "trajectories.jsonl")
    assert sorted(r["rank"] for r in records) == [0, 0, 1, 1]  # 2 completions on each rank
    errors = [c["error"] for r in records for c in r["tool_calls"] if c["tool"] == "add"]
    assert any("rank 1" in (e or "") for e in errors) and None in errors  # both ranks' tools ran
    assert "NPROC_PER_NODE=2" in (run / "command.sh").read_text()  # the command reruns as it ran
