"""The turn-level credit math (``rewards/credit.py``): returns, per-turn normalisation, token ownership."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swift_rlfactory.env.config import EnvConfigError, load_env_config
from swift_rlfactory.rewards.credit import (
    EPS,
    discounted_returns,
    token_advantages,
    trained_token_turns,
    turn_advantages,
)

X = -100  # label of a token without loss


def test_discounted_returns():
    assert discounted_returns([1.0, 0.0, 2.0], 0.5) == [1.5, 1.0, 2.0]
    assert discounted_returns([1.0, 0.0, 2.0], 0.0) == [1.0, 0.0, 2.0]  # MT-GRPO: the turn's own reward
    assert discounted_returns([1.0, 0.0, 2.0], 1.0) == [3.0, 2.0, 2.0]  # suffix sums
    assert discounted_returns([], 0.9) == []


def test_turns_are_normalised_per_turn_index_within_the_group():
    # Group 0: three trajectories of 2, 2 and 1 turns; group 1: two trajectories.
    returns = [[2.0, 1.0], [0.0, 0.0], [1.0], [5.0], [3.0]]
    adv = turn_advantages(returns, [[0, 1, 2], [3, 4]], scale="group")
    std0 = statistics.stdev([2.0, 0.0, 1.0])
    assert adv[0][0] == pytest.approx(1.0 / (std0 + EPS))
    assert adv[1][0] == pytest.approx(-1.0 / (std0 + EPS))
    assert adv[2][0] == pytest.approx(0.0)
    std1 = statistics.stdev([1.0, 0.0])  # turn 1: only the two trajectories that reached it
    assert adv[0][1] == pytest.approx(0.5 / (std1 + EPS))
    assert adv[1][1] == pytest.approx(-0.5 / (std1 + EPS))
    assert len(adv[2]) == 1  # no advantage for a turn it never took
    # Group 1 is normalised on its own: a 5 there is compared with the 3, not with group 0.
    assert adv[3][0] == pytest.approx(1.0 / (statistics.stdev([5.0, 3.0]) + EPS))


def test_a_turn_index_only_one_trajectory_reached_has_no_baseline():
    adv = turn_advantages([[1.0, 7.0, 9.0], [1.0]], [[0, 1]])
    assert adv == [[0.0, 0.0, 0.0], [0.0]]  # equal turn 0, and nobody to compare turns 1-2 with


def test_trajectories_without_turn_credit_are_left_out():
    adv = turn_advantages([[1.0], None, [3.0]], [[0, 1, 2]])
    assert adv[1] == []
    assert adv[0][0] == pytest.approx(-1.0 / (statistics.stdev([1.0, 3.0]) + EPS))


def test_scale_none_centres_and_batch_divides_by_the_batch_std():
    returns = [[2.0], [0.0], [10.0], [6.0]]
    groups = [[0, 1], [2, 3]]
    assert turn_advantages(returns, groups, scale="none") == [[1.0], [-1.0], [2.0], [-2.0]]
    batch_std = statistics.stdev([2.0, 0.0, 10.0, 6.0])
    batch = turn_advantages(returns, groups, scale="batch")
    assert batch[0][0] == pytest.approx(1.0 / (batch_std + EPS))
    assert batch[2][0] == pytest.approx(2.0 / (batch_std + EPS))


def test_gamma_zero_is_mt_grpo():
    """MT-GRPO: turn advantage on the tool-call turn, the outcome alone on the answer turn."""
    turn_rewards = [[1.0, 0.0], [0.0, 0.0]]  # tool success on turn 0 only; nothing per turn on the answer
    adv = turn_advantages([discounted_returns(r, 0.0) for r in turn_rewards], [[0, 1]])
    assert adv[0][0] > 0 > adv[1][0]
    assert adv[0][1] == adv[1][1] == 0.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.floats(-10, 10, allow_nan=False), min_size=1, max_size=4), min_size=2, max_size=6),
    st.sampled_from(["group", "none"]),
)
def test_each_turn_index_is_centred_and_bounded(returns, scale):
    adv = turn_advantages(returns, [list(range(len(returns)))], scale=scale)
    for t in range(max(len(r) for r in returns)):
        at_t = [a[t] for a in adv if len(a) > t]
        if len(at_t) > 1:
            assert math.fsum(at_t) == pytest.approx(0.0, abs=1e-6)
        if scale == "group":  # |z| <= (n-1)/sqrt(n) with the sample standard deviation
            assert all(abs(a) <= (len(at_t) - 1) / math.sqrt(len(at_t)) + 1e-6 for a in at_t)


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_returns_past_floats_range_get_no_turn_advantage_instead_of_crashing_the_step(scale, caplog):
    overflowed = discounted_returns([1e308, 1e308], 0.95)  # finite rewards, an infinite return
    assert overflowed == [math.inf, 1e308]
    returns = [overflowed, [0.0, 1.0], [2.0, math.nan], [1e308], [1e308], [1.7e308], [1.7e308], [-1.7e308]]
    groups = [[0, 1, 2], [3, 4], [5, 6, 7]]
    with caplog.at_level("WARNING", logger="swift_rlfactory.rewards.credit"):
        adv = turn_advantages(returns, groups, scale)
    assert all(math.isfinite(a) for turn in adv for a in turn)
    # the non-finite returns get 0 and stay out of the statistics: the finite ones are compared alone
    assert adv[0][0] == 0.0 and adv[2][1] == 0.0
    assert adv[1][0] == pytest.approx(-adv[2][0]) and adv[1][0] < 0
    assert adv[0][1] == pytest.approx(-adv[1][1]) and adv[0][1] > 0
    # finite returns whose statistics overflow (a mean of two 1e308s, a distance of 2.3e308): 0 as well
    assert adv[3:] == [[0.0]] * 5
    assert "turn advantage" in caplog.text


def test_token_ownership_follows_the_turns_and_skips_the_prompt():
    # prompt [1 7 8 2] (contains turn 0's ids, untrained), turn 0 [7 8] + template end [9 5],
    # observation [3 4], turn 1 [6] + [9], all labels as ms-swift's encode leaves them.
    input_ids = [1, 7, 8, 2, 7, 8, 9, 5, 3, 4, 6, 9]
    labels = [X, X, X, X, 7, 8, 9, 5, X, X, 6, 9]
    owners = trained_token_turns(input_ids, labels, [[7, 8], [6]])
    assert owners == [0, 0, 0, 0, 1, 1]


def test_a_masked_prefix_belongs_to_its_turn_but_carries_no_loss():
    prefix = [50, 51]
    input_ids = [1, *prefix, 7, 8, 9, 3, *prefix, 6, 9]
    labels = [X, X, X, 7, 8, 9, X, X, X, 6, 9]
    owners = trained_token_turns(
        input_ids, labels, [[*prefix, 7, 8], [*prefix, 6]], [[0, 0, 1, 1], [0, 0, 1]]
    )
    assert owners == [0, 0, 0, 1, 1]


def test_a_turn_cut_by_truncation_keeps_the_outcome_advantage_only():
    input_ids = [8, 9, 3, 6, 9]  # left truncation cut the head of turn 0 ([7, 8])
    labels = [8, 9, X, 6, 9]
    owners = trained_token_turns(input_ids, labels, [[7, 8], [6]])
    assert owners == [None, None, 1, 1]
    assert token_advantages(0.5, [2.0, -1.0], owners, turn_weight=0.5) == [0.5, 0.5, 0.0, 0.0]


def test_a_trajectory_none_of_whose_turns_is_found_keeps_the_outcome_advantage_only():
    """Its only turn cut by truncation, or no turn ids at all: every trained token is nobody's (this raised
    ValueError inside the trainer's batch postprocess, ending the run)."""
    assert trained_token_turns([8, 9, 5], [8, 9, 5], [[7, 8]]) == [None, None, None]
    assert trained_token_turns([8, 9], [X, 9], []) == [None]
    assert token_advantages(0.5, [2.0], [None, None], turn_weight=1.0) == [0.5, 0.5]


def test_token_advantages_add_the_weighted_turn_part():
    assert token_advantages(1.0, [2.0, -2.0], [0, 0, 1], turn_weight=0.25) == [1.5, 1.5, 0.5]
    assert token_advantages(1.0, [2.0], [0, 1], turn_weight=1.0) == [3.0, 1.0]  # no reward for turn 1


def test_credit_block_is_validated_naming_the_field(tmp_path):
    path = tmp_path / "env.yaml"
    path.write_text("reward: [{name: em}]\n")
    assert load_env_config(path).credit.mode == "trajectory"  # the default: stock GRPO
    path.write_text("reward: [{name: em}]\ncredit: {mode: turn, gamma: 0.5, turn_weight: 0.3}\n")
    credit = load_env_config(path).credit
    assert (credit.mode, credit.gamma, credit.turn_weight) == ("turn", 0.5, 0.3)
    for bad, field in [
        ("{mode: step}", "credit.mode"),
        ("{gamma: 1.5}", "credit.gamma"),
        ("{weight: 1}", "credit.weight"),
    ]:
        path.write_text(f"reward: [{{name: em}}]\ncredit: {bad}\n")
        with pytest.raises(EnvConfigError, match=field):
            load_env_config(path)
