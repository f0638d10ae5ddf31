"""The booking world through the real `swift rlhf --rlhf_type grpo` CLI on CPU (tiny Qwen3, LoRA, 2 steps):
each completion gets its own episode (set up from its row, torn down after its reward), and the reward
reads the state. The tiny model cannot plan a trip; what is checked is the lifecycle and the reward's shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swift_rlfactory.runs.log import read_trajectories

from .conftest import run_cpu_grpo

BOOKING = Path(__file__).resolve().parents[1] / "examples" / "booking"
TERMS = {"reward.py:success", "reward.py:constraints", "format", "total"}


@pytest.mark.timeout(900)
def test_booking_trains_one_grpo_run_with_an_episode_per_completion(agent_model: Path, tmp_path):
    rows = [json.loads(line) for line in (BOOKING / "data" / "train.jsonl").read_text().splitlines()[:4]]
    run = run_cpu_grpo(tmp_path, agent_model, rows, {"RLFACTORY_ENV": str(BOOKING / "env.yaml")})
    trajectories = read_trajectories(run / "trajectories.jsonl")
    assert len(trajectories) >= 8  # 2 steps x 4 completions
    for t in trajectories:
        assert t["stop_reason"] != "error", t["error"]
        assert set(t["rewards"]) == TERMS and t["row"]["task"]["type"] == t["row"]["type"]
        expected = t["rewards"]["reward.py:success"] + 0.5 * t["rewards"]["reward.py:constraints"]
        assert t["rewards"]["total"] == pytest.approx(expected + 0.1 * t["rewards"]["format"])
    logs = [json.loads(line) for line in (run / "logging.jsonl").read_text().splitlines()]
    steps = [entry for entry in logs if "reward" in entry]
    setups = sum(entry[key] for entry in steps for key in entry if key.endswith("episode/setups"))
    errors = sum(entry[key] for entry in steps for key in entry if key.endswith("episode/setup_errors"))
    assert setups >= len(trajectories) and errors == 0, steps[-1]
