"""Two CPU ranks of the real `swift rlhf` with our plugin (`NPROC_PER_NODE=2 ... --use_cpu true --ddp_backend
gloo`): every metric we log describes the whole batch of both ranks, and every record names its run and rank.

The environment's `add` fails on rank 1 only (tests/environments/ranks), so the ranks' own metrics differ
and rank 0's cannot pass for the batch's. Slow (about a minute on two cores) but part of the CPU suite.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swift_rlfactory.rewards.metrics import reward_metrics
from swift_rlfactory.rollout.metrics import tool_metrics
from swift_rlfactory.runs.log import read_trajectories
from swift_rlfactory.trajectory import Trajectory

from .conftest import AGENT_PAIRS, ROOT, run_cpu_grpo

pytestmark = pytest.mark.timeout(300)
RANKS_ENV = ROOT / "tests" / "environments" / "ranks" / "env.yaml"


@pytest.fixture(scope="module")
def two_rank_run(agent_model: Path, tmp_path_factory) -> Path:
    rows = [
        {"messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "solution": str(a + b)}
        for a, b in AGENT_PAIRS
    ]
    work = tmp_path_factory.mktemp("ranks")
    env = {"RLFACTORY_ENV": str(RANKS_ENV)}
    return run_cpu_grpo(work, agent_model, rows, env, "--per_device_train_batch_size", "2", ranks=2)


def _steps(run: Path) -> dict[int, dict]:
    logged = [json.loads(line) for line in (run / "logging.jsonl").read_text().splitlines()]
    return {int(e["global_step/max_steps"].split("/")[0]): e for e in logged if "reward" in e}


def _metrics(records: list[dict]) -> dict[str, float]:
    trajectories = [Trajectory.from_dict(r) for r in records]
    return {**tool_metrics(trajectories), **reward_metrics(trajectories)}


def test_every_logged_metric_is_the_batch_of_both_ranks(two_rank_run: Path):
    records = read_trajectories(two_rank_run / "trajectories.jsonl")
    steps = _steps(two_rank_run)
    assert sorted(steps) == [1, 2]
    differed = False
    for step, logged in steps.items():
        batch = [r for r in records if r["step"] == step]
        assert sorted({r["rank"] for r in batch}) == [0, 1] and len(batch) == 4  # 2 completions per rank
        expected = _metrics(batch)
        assert expected and all(key in logged for key in expected), sorted(set(expected) - set(logged))
        for key, value in expected.items():  # logging.jsonl keeps 8 digits
            assert logged[key] == pytest.approx(value, abs=1e-6), (step, key)
        rank0 = _metrics([r for r in batch if r["rank"] == 0])
        differed |= any(rank0.get(k) != pytest.approx(v, abs=1e-6) for k, v in expected.items())
    assert differed  # rank 0's own metrics would not have passed


def test_records_name_one_run_and_each_rank_and_rank_0_held_the_folder(two_rank_run: Path):
    records = read_trajectories(two_rank_run / "trajectories.jsonl")
    assert {r["rank"] for r in records} == {0, 1}
    [run_id] = {r["run"] for r in records}  # rank 1 took rank 0's run id
    holder = json.loads((two_rank_run / ".lock").read_text())
    assert holder["run_id"] == run_id and holder["pid"] > 0
    errors = [c["error"] for r in records for c in r["tool_calls"] if c["tool"] == "add"]
    assert any("rank 1" in (e or "") for e in errors) and None in errors  # both ranks' tools ran
