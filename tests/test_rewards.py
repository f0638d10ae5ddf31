"""Reward registry and built-in rules."""

import asyncio
import time

import pytest

from swift_rlfactory.env.config import RewardTerm
from swift_rlfactory.rewards.registry import RewardSpec, register_reward
from swift_rlfactory.rewards.rules import exact_match, extract_answer, normalize_answer, token_f1
from swift_rlfactory.trajectory import Trajectory


def traj(final: str, golds=("Paris",), calls=()):
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": final}]
    return Trajectory(messages=messages, tool_calls=list(calls), row={"golden_answers": list(golds)})


def test_squad_normalisation_and_many_golds():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert exact_match("the paris", ["Lyon", "Paris"]) == 1.0
    assert exact_match("Paris, France", ["Paris"]) == 0.0
    assert token_f1("Paris, France", ["Paris"]) == pytest.approx(2 / 3)
    assert token_f1("nothing", ["Paris"]) == 0.0
    assert extract_answer("<answer>a</answer> then <answer> b </answer>") == "b"


def test_builtin_rewards_through_spec():
    spec = RewardSpec(
        [RewardTerm(name="em"), RewardTerm(name="f1", weight=0.5), RewardTerm(name="format", weight=0.2)]
    )
    good, partial, untagged = (
        traj("<answer>Paris</answer>"),
        traj("<answer>Paris France</answer>"),
        traj("Paris"),
    )
    totals = spec.score([good, partial, untagged])
    assert totals == pytest.approx([1 + 0.5 + 0.2, 0 + 0.5 * (2 / 3) + 0.2, 0.0])
    assert good.rewards == {"em": 1.0, "f1": 1.0, "format": 1.0, "total": pytest.approx(1.7)}


def test_format_penalises_malformed_calls_and_tool_use_budget():
    bad_call = {"tool": "", "error": "could not parse tool call: empty"}
    ok_call = {"tool": "search", "error": None}
    spec = RewardSpec([RewardTerm(name="format"), RewardTerm(name="tool_use", args={"max_calls": 2})])
    t1, t2, t3 = (
        traj("<answer>x</answer>", calls=[bad_call, ok_call]),
        traj("<answer>x</answer>", calls=[ok_call]),
        traj("<answer>x</answer>", calls=[ok_call] * 4),
    )
    spec.score([t1, t2, t3])
    assert t1.rewards["format"] == 0.0 and t1.rewards["tool_use"] == 0.5
    assert t2.rewards == {"format": 1.0, "tool_use": 1.0, "total": 2.0}
    assert t3.rewards["tool_use"] == pytest.approx(1.0 - 0.5 * 2)


def test_user_rewards_by_path_registered_and_async_run_concurrently(tmp_path):
    (tmp_path / "my_rewards.py").write_text(
        "def brevity(trajectory, limit=10):\n    return float(len(trajectory.final_response) <= limit)\n"
    )

    @register_reward("slow_judge")
    async def slow_judge(trajectory):
        await asyncio.sleep(0.2)
        return 0.5

    spec = RewardSpec(
        [
            RewardTerm(name="my_rewards.py:brevity", args={"limit": 20}),
            RewardTerm(name="slow_judge", weight=2),
        ],
        base_dir=tmp_path,
    )
    t0 = time.perf_counter()
    totals = spec.score([traj("<answer>x</answer>") for _ in range(10)])
    assert time.perf_counter() - t0 < 1.0  # ten 0.2 s judges overlap
    assert totals == [2.0] * 10


def test_failing_reward_scores_zero_and_is_counted():
    @register_reward("broken_judge")
    def broken(trajectory):
        raise ConnectionError("judge down")

    spec = RewardSpec([RewardTerm(name="em"), RewardTerm(name="broken_judge")])
    assert spec.score([traj("<answer>Paris</answer>")]) == [1.0]
    assert spec.errors == 1


def test_bad_reward_names_fail_at_start_naming_the_term(tmp_path):
    with pytest.raises(ValueError, match=r"reward\[1\]\.name: unknown reward 'emm'"):
        RewardSpec([RewardTerm(name="em"), RewardTerm(name="emm")])
    with pytest.raises(ValueError, match=r"reward\[0\]\.name: .*has no function 'nope'"):
        RewardSpec([RewardTerm(name="json:nope")], base_dir=tmp_path)
