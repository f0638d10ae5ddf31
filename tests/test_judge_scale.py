"""A judge's score outside the rubric's scale is an error (issue 32): never clamped, counted as
``judge/out_of_range``, logged once with the rubric, and the term's fallback applies."""

from __future__ import annotations

import logging

import pytest

from swift_rlfactory.rewards.registry import RewardSpec
from swift_rlfactory.rewards.terms import RewardTerm

from .test_judge import judge_url, server, traj  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(60)

RUBRIC = "Score from 0 to 1 whether {response} names the capital of France (rubric-marker-42)."


def test_scores_off_the_scale_are_errors_counted_and_logged_once_with_the_rubric(server, caplog):  # noqa: F811
    term = RewardTerm(
        name="judge",
        fallback=0.25,
        args={"base_url": server.url, "model": "verbatim", "rubric": RUBRIC, "max_score": 1},
    )
    spec = RewardSpec([term])
    batch = [traj("1e308"), traj("7"), traj("-5"), traj("0.5"), traj("1")]
    with caplog.at_level(logging.WARNING, logger="swift_rlfactory"):
        assert spec.score(batch) == [0.25, 0.25, 0.25, 0.5, 1.0]
    assert [t.reward_errors.get("judge") for t in batch] == ["error: JudgeError"] * 3 + [None, None]
    metrics = spec.drain_metrics()
    assert metrics["judge/out_of_range"] == 3.0
    warned = [r.getMessage() for r in caplog.records if "rubric-marker-42" in r.getMessage()]
    assert len(warned) == 1 and "outside the rubric's scale" in warned[0] and "out_of_range" in warned[0]
    spec.close()


def test_a_group_with_one_score_off_the_scale_scores_the_fallback(server):  # noqa: F811
    term = RewardTerm(
        name="judge",
        fallback=0.5,
        args={"base_url": server.url, "model": "scale", "mode": "group", "max_score": 10},
    )
    spec = RewardSpec([term])
    assert spec.score([traj("Paris"), traj("Lyon")]) == [0.5, 0.5]  # 15 and -3 of 10
    assert spec.drain_metrics()["judge/out_of_range"] == 1.0  # one reply, one error
    spec.close()
