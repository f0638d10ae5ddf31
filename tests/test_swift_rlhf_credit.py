"""End to end: `swift rlhf --rlhf_type grpo` with ``credit: {mode: turn}``, per-turn rewards and a judge, on CPU.

The tiny tool-calling Qwen3 trains with LoRA for two steps in ``tests/environments/credit`` (the e2e agent's tools,
``turn_tool_success``, a per-turn brevity reward, a pointwise ``judge`` served over HTTP by the real
rule-based judge server, ``credit: {mode: turn}``). The plugin's GRPO trainer
subclass must be the one that ran, take every trajectory's per-turn rewards from the reward, place them on
the tokens, and log the credit metrics; the logged turn advantage is recomputed here from
``trajectories.jsonl`` by hand.
"""

from __future__ import annotations

import json
import math
from itertools import groupby
from pathlib import Path

import pytest

from swift_rlfactory.runs.log import read_trajectories

from .conftest import AGENT_PAIRS, ROOT, judge_server, run_cpu_grpo

CREDIT_ENV = ROOT / "tests" / "environments" / "credit" / "env.yaml"
GENERATIONS = 2


@pytest.fixture(scope="module")
def judge_url():
    """The rule-based judge (1 when the ``<answer>`` matches the reference), as the env's ``base_url``."""
    with judge_server() as url:
        yield f"{url}/v1"


@pytest.fixture(scope="module")
def credit_run(agent_model: Path, judge_url: str, tmp_path_factory) -> Path:
    rows = [
        {"messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "solution": str(a + b)}
        for a, b in AGENT_PAIRS
    ]
    env = {"RLFACTORY_ENV": str(CREDIT_ENV), "CREDIT_JUDGE_URL": judge_url}
    flags = ("--num_generations", str(GENERATIONS), "--save_strategy", "no", "--temperature", "1.0")
    return run_cpu_grpo(tmp_path_factory.mktemp("credit"), agent_model, rows, env, *flags)


def _train_logs(run_dir: Path) -> list[dict]:
    logs = [json.loads(line) for line in (run_dir / "logging.jsonl").read_text().splitlines()]
    return [entry for entry in logs if "reward" in entry]


def _turn_advantage_abs_mean(trajectories: list[dict]) -> float:
    """The formula for groups of two, by hand: at a turn index both reached, the returns G_a != G_b give
    |A_turn| = (|d| / 2) / (|d| / sqrt(2) + 1e-4) for both, and 0 otherwise (gamma 0.95, weight 1)."""
    returns = []
    for t in trajectories:
        rewards, g = t["turn_rewards"]["total"], 0.0
        row = []
        for r in reversed(rewards):
            g = r + 0.95 * g
            row.append(g)
        returns.append(row[::-1])
    values = []
    for a, b in zip(returns[::GENERATIONS], returns[1::GENERATIONS], strict=True):
        for ga, gb, mine in ((a, b, a), (b, a, b)):
            for t in range(len(mine)):
                d = abs(ga[t] - gb[t]) if t < len(gb) else 0.0
                values.append((d / 2) / (d / math.sqrt(2) + 1e-4) if d else 0.0)
    return sum(values) / len(values)


@pytest.mark.timeout(900)
def test_turn_credit_trains_and_logs_its_metrics(credit_run: Path):
    logs = _train_logs(credit_run)
    assert len(logs) == 2, logs
    for entry in logs:
        assert entry["credit/unlocated_turns"] == 0.0  # every turn's tokens were found in the encode
        assert entry["credit/turns_per_trajectory"] >= 1.0
        assert math.isfinite(entry["loss"])
    trajectories = read_trajectories(credit_run / "trajectories.jsonl")
    assert len(trajectories) == 8  # 2 steps x 4 completions
    for t in trajectories:
        turns = sum(1 for m in t["messages"] if m["role"] == "assistant")
        assert len(t["turn_rewards"]["total"]) == turns  # one per-turn total per assistant turn
    # The logged turn advantage is the formula applied to exactly these per-turn rewards.
    by_step = [list(rows) for _, rows in groupby(trajectories, key=lambda t: t["step"])]
    for entry, rows in zip(logs, by_step, strict=True):
        assert entry["credit/turn_advantage_abs_mean"] == pytest.approx(
            _turn_advantage_abs_mean(rows), abs=1e-4
        )
    assert any(entry["credit/turn_advantage_abs_mean"] > 0 for entry in logs)
    assert any(entry["tools/calls_per_trajectory"] > 0 for entry in logs)  # tool turns were credited


@pytest.mark.timeout(900)
def test_the_judge_scored_every_trajectory(credit_run: Path):
    logs = _train_logs(credit_run)
    assert sum(entry["judge/calls"] for entry in logs) > 0
    assert all(entry["judge/errors"] == 0 for entry in logs)
    for t in read_trajectories(credit_run / "trajectories.jsonl"):
        assert t["rewards"]["judge"] == t["rewards"]["em"], t  # the rule judge grades as em does
