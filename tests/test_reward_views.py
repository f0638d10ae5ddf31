"""Each user reward term reads its own copy of the trajectory: a term that edits what it is given changes
neither a later term's score nor the trajectory that is logged."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from swift_rlfactory.rewards.registry import RewardSpec
from swift_rlfactory.rewards.terms import RewardTerm
from swift_rlfactory.runs.log import TrajectoryLog, read_trajectories
from swift_rlfactory.trajectory import Trajectory

PLUGIN = """
def vandal(trajectory):
    trajectory.messages[-1]["content"] = "nothing"  # edits a message in place
    trajectory.messages.append({"role": "assistant", "content": "more"})
    trajectory.row["golden_answers"].clear()
    trajectory.tool_calls.clear()
    return 0.5

async def async_vandal(trajectory):
    trajectory.messages.clear()
    return 0.5

def answered(trajectory):
    last = trajectory.messages[-1]["content"]
    gold = trajectory.row["golden_answers"]
    return float(bool(gold) and gold[0] in last and len(trajectory.tool_calls) == 1)
"""


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    (tmp_path / "rewards.py").write_text(PLUGIN)
    return tmp_path


def traj() -> Trajectory:
    return Trajectory(
        messages=[
            {"role": "user", "content": "capital of France?"},
            {"role": "assistant", "content": "<answer>Paris</answer>"},
        ],
        tool_calls=[{"name": "search", "arguments": {"q": "France"}, "turn": 0}],
        turns=1,
        stop_reason="answer",
        row={"golden_answers": ["Paris"]},
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("vandal", ["vandal", "async_vandal"])
def test_a_term_after_one_that_mutates_scores_as_if_listed_first(plugin, vandal):
    first = RewardSpec([RewardTerm(name="rewards.py:answered")], base_dir=plugin)
    after = RewardSpec(
        [
            RewardTerm(name=f"rewards.py:{vandal}"),
            RewardTerm(name="rewards.py:answered"),
            RewardTerm(name="em"),
        ],
        base_dir=plugin,
    )
    alone, behind = traj(), traj()
    first.score([alone])
    after.score([behind])
    assert behind.rewards["rewards.py:answered"] == alone.rewards["rewards.py:answered"] == 1.0
    assert behind.rewards["em"] == 1.0  # a built-in read the model's answer, not the vandal's
    first.close()
    after.close()


@pytest.mark.timeout(60)
def test_the_log_records_what_the_model_did_whatever_a_reward_did(plugin, tmp_path):
    spec = RewardSpec([RewardTerm(name="rewards.py:vandal")], base_dir=plugin)
    trajectory = traj()
    before = copy.deepcopy((trajectory.messages, trajectory.tool_calls, trajectory.row))
    spec.score([trajectory])
    spec.close()
    log = TrajectoryLog(tmp_path / "trajectories.jsonl")
    log.write([trajectory], step=1)
    [line] = read_trajectories(tmp_path / "trajectories.jsonl")
    assert [line["messages"], line["tool_calls"], line["row"]] == json.loads(json.dumps(before))
    assert line["rewards"]["rewards.py:vandal"] == 0.5
