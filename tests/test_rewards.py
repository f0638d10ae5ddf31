"""Reward registry and built-in rules."""

import asyncio
import json
import logging
import math
import re
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swift_rlfactory.env.config import EnvConfigError, load_env_config
from swift_rlfactory.rewards.metrics import reward_metrics
from swift_rlfactory.rewards.registry import RewardSpec, register_reward
from swift_rlfactory.rewards.rules import (
    answer_blocks,
    exact_match,
    extract_answer,
    normalize_answer,
    token_f1,
)
from swift_rlfactory.rewards.terms import RewardTerm
from swift_rlfactory.trajectory import Trajectory


def traj(final: str, golds=("Paris",), calls=()):
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": final}]
    return Trajectory(messages=messages, tool_calls=list(calls), row={"golden_answers": list(golds)})


def test_squad_normalisation_and_many_golds():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert exact_match("the paris", ["Lyon", "Paris"]) == 1.0
    assert exact_match("Paris, France", ["Paris"]) == 0.0


def test_exact_match_compares_numbers_as_numbers():
    assert exact_match("-227", ["227"]) == 0.0  # SQuAD's normalisation alone drops the sign
    assert exact_match("12.5", ["125"]) == 0.0  # ... and the decimal point
    assert exact_match("1,234", ["1234"]) == 1.0
    assert exact_match(" 28080 ", ["28080"]) == 1.0
    assert exact_match("28080.0", ["28080"]) == 1.0
    assert exact_match("-41", ["-41"]) == 1.0
    assert exact_match("41", ["x", "41"]) == 1.0
    assert exact_match("41 apples", ["41"]) == 0.0  # not a plain number: SQuAD rules, no match
    assert exact_match("1984", ["Nineteen Eighty-Four", "1984"]) == 1.0
    assert token_f1("Paris, France", ["Paris"]) == pytest.approx(2 / 3)
    assert token_f1("nothing", ["Paris"]) == 0.0
    assert extract_answer("<answer>a</answer> then <answer> b </answer>") == "b"


@given(st.lists(st.sampled_from(["<answer>", "</answer>", "<answer", "answer>", "x", "\n"]), max_size=12))
def test_answer_blocks_read_as_the_regex_did(pieces):
    text = "".join(pieces)
    assert answer_blocks(text) == re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)


def test_a_reply_repeating_the_answer_tag_is_scored_in_linear_time():
    """A policy degenerating into "<answer><answer>..." (64k characters): the regex took 3.6 s per reward,
    on the reward's event loop, where no timeout_s can stop an inline rule."""
    spec = RewardSpec([RewardTerm(name="em"), RewardTerm(name="f1"), RewardTerm(name="format")])
    t0 = time.perf_counter()
    assert spec.score([traj("<answer>" * 8000)]) == [0.0]
    assert time.perf_counter() - t0 < 2.0


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


def test_an_answer_passed_to_a_call_written_without_tags_earns_nothing_through_spec():
    """The reply's parser reads these as calls (a bare hermes call, Llama's call after prose), so the answer
    in the code they pass is the tool's input, not the reply's answer; JSON inside an answer stays the
    answer. Before, both calls scored em 1, f1 1 and (Llama's) format 1."""
    spec = RewardSpec([RewardTerm(name="em"), RewardTerm(name="f1"), RewardTerm(name="format")])
    bare = '{"name": "run", "arguments": {"code": "print(\\"<answer>4</answer>\\")"}}'
    prose = 'Ok. {"name": "run", "parameters": {"code": "<answer>4</answer>"}}'
    json_answer = '<answer>{"name": "run", "arguments": {"code": "4"}}</answer>'
    golds = ("4",)
    assert spec.score([traj(bare, golds), traj(prose, golds)]) == [0.0, 0.0]
    assert spec.score([traj(json_answer, ('{"name": "run", "arguments": {"code": "4"}}',))]) == [3.0]


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


def three_turns():
    """search (ok) -> search (one ok, one failed) -> answer."""
    call = '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>'
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": call},
        {"role": "tool", "content": "hit"},
        {"role": "assistant", "content": call + call},
        {"role": "tool", "content": "hit"},
        {"role": "tool", "content": "error"},
        {"role": "assistant", "content": "<answer>Paris</answer>"},
    ]
    calls = [
        {"tool": "search", "error": None, "turn": 1},
        {"tool": "search", "error": None, "turn": 2},
        {"tool": "", "error": "could not parse tool call: bad JSON", "turn": 2},
    ]
    return Trajectory(messages=messages, tool_calls=calls, turns=3, row={"golden_answers": ["Paris"]})


def test_per_turn_builtins_follow_the_contract():
    spec = RewardSpec(
        [
            RewardTerm(name="em"),
            RewardTerm(name="turn_tool_success", weight=0.5),
            RewardTerm(name="turn_format", weight=2.0),
        ]
    )
    t = three_turns()
    [total] = spec.score([t])
    assert t.turn_rewards["turn_tool_success"] == [1.0, 0.5, 0.0]
    assert t.turn_rewards["turn_format"] == [1.0, 0.0, 1.0]
    # per turn: weighted sum over the per-turn components only (em is an outcome reward)
    assert t.turn_rewards["total"] == pytest.approx([0.5 + 2.0, 0.25 + 0.0, 0.0 + 2.0])
    assert set(t.turn_rewards) == {"turn_tool_success", "turn_format", "total"}
    # scalars are the means over turns, and the scalar total includes weight * mean
    assert t.rewards["turn_tool_success"] == pytest.approx(0.5)
    assert t.rewards["turn_format"] == pytest.approx(2 / 3)
    assert total == t.rewards["total"] == pytest.approx(1.0 + 0.5 * 0.5 + 2.0 * 2 / 3)
    line = json.loads(json.dumps(t.to_dict()))
    assert line["turn_rewards"]["turn_format"] == [1.0, 0.0, 1.0]
    assert Trajectory.from_dict({"step": 3, **line}).turn_rewards == t.turn_rewards
    metrics = reward_metrics([t, t])
    assert metrics["rlfactory/turn/turn_tool_success"] == pytest.approx(0.5)
    assert metrics["rlfactory/turn/total"] == pytest.approx(sum(t.turn_rewards["total"]) / 3)
    assert metrics["rlfactory/em"] == 1.0 and metrics["rewards/errors"] == 0.0


def test_per_turn_rewards_score_the_generated_turns_not_the_rows_chat_history():
    # The row brings an earlier exchange; the rollout then generates the same three turns as three_turns.
    t = three_turns()
    history = [
        {"role": "user", "content": "earlier q"},
        {"role": "assistant", "content": "<answer>old</answer>"},
    ]
    t.messages = history + t.messages
    register_reward("turn_lengths", per_turn=True)(
        lambda trajectory: [float(len(text)) for text in trajectory.assistant_turns]
    )
    spec = RewardSpec(
        [
            RewardTerm(name="turn_tool_success"),
            RewardTerm(name="turn_format"),
            RewardTerm(name="turn_lengths"),
        ]
    )
    spec.score([t])
    assert t.assistant_turns == [m["content"] for m in three_turns().messages if m["role"] == "assistant"]
    # index i is generated turn i + 1, the turn its tool calls are recorded under
    assert t.turn_rewards["turn_tool_success"] == [1.0, 0.5, 0.0]
    assert t.turn_rewards["turn_format"] == [1.0, 0.0, 1.0]
    assert len(t.turn_rewards["turn_lengths"]) == t.turns == 3 and not t.reward_errors
    # without a turn count (a hand-made trajectory) every assistant message is a turn
    assert Trajectory(messages=t.messages).assistant_turns[0] == "<answer>old</answer>"


def test_list_rewards_are_per_turn_and_wrong_lengths_fall_back_counted(tmp_path):
    (tmp_path / "steps.py").write_text(
        "def good(trajectory):\n    return [0.2] * len(trajectory.assistant_turns)\n"
        "def short(trajectory):\n    return [1.0]\n"
        "def scalar(trajectory):\n    return 1.0\n"
        "def text(trajectory):\n    return ['a', 'b', 'c']\n"
    )
    spec = RewardSpec(
        [
            RewardTerm(name="steps.py:good"),
            RewardTerm(name="steps.py:short", per_turn=True, fallback=-1.0),
            RewardTerm(name="steps.py:scalar", per_turn=True),
            RewardTerm(name="steps.py:text"),
        ],
        base_dir=tmp_path,
    )
    t = three_turns()
    spec.score([t])
    assert t.turn_rewards["steps.py:good"] == [0.2, 0.2, 0.2]
    assert t.turn_rewards["steps.py:short"] == [-1.0, -1.0, -1.0]  # the fallback, per turn
    assert t.rewards["steps.py:short"] == -1.0
    assert t.turn_rewards["steps.py:scalar"] == [0.0, 0.0, 0.0]
    assert "steps.py:text" not in t.turn_rewards and t.rewards["steps.py:text"] == 0.0
    assert t.reward_errors == {
        "steps.py:short": "wrong_length: 1 for 3 turns",
        "steps.py:scalar": "wrong_length: a scalar for 3 turns",
        "steps.py:text": "error: ValueError",
    }
    assert t.turn_rewards["total"] == pytest.approx([0.2 - 1.0] * 3)
    assert spec.errors == 3
    assert reward_metrics([t])["rewards/wrong_length"] == 2.0


@pytest.mark.timeout(30)
def test_hung_rewards_time_out_and_the_step_goes_on():
    release = threading.Event()

    @register_reward("hung_async_judge")
    async def hung_async(trajectory):
        await asyncio.Event().wait()

    @register_reward("hung_sync_judge")
    def hung_sync(trajectory):
        release.wait()  # a blocking client with no timeout of its own
        return 1.0

    spec = RewardSpec(
        [
            RewardTerm(name="em"),
            RewardTerm(name="hung_async_judge", timeout_s=0.3),
            RewardTerm(name="hung_sync_judge", timeout_s=0.3, fallback=0.25),
        ]
    )
    t0 = time.perf_counter()
    trajectories = [traj("<answer>Paris</answer>") for _ in range(8)]
    totals = spec.score(trajectories)
    assert time.perf_counter() - t0 < 10  # instead of forever; the eight hung calls overlap
    release.set()
    assert totals == [1.25] * 8
    assert trajectories[0].reward_errors == {"hung_async_judge": "timeout", "hung_sync_judge": "timeout"}
    assert spec.failures["timeout"] == 16
    assert reward_metrics(trajectories)["rewards/timeouts"] == 16.0


def test_non_finite_scores_fall_back_and_are_counted(caplog):
    @register_reward("nan_judge")
    async def nan_judge(trajectory):
        return math.nan

    @register_reward("inf_steps", per_turn=True)
    def inf_steps(trajectory):
        return [1.0, math.inf, -math.inf]

    spec = RewardSpec([RewardTerm(name="nan_judge", fallback=0.1), RewardTerm(name="inf_steps")])
    t = three_turns()
    with caplog.at_level(logging.WARNING):
        [total] = spec.score([t])
    assert math.isfinite(total)
    assert t.rewards["nan_judge"] == 0.1
    assert t.turn_rewards["inf_steps"] == [1.0, 0.0, 0.0]
    assert t.rewards["inf_steps"] == pytest.approx(1 / 3)
    assert t.reward_errors == {"nan_judge": "non_finite", "inf_steps": "non_finite"}
    assert reward_metrics([t])["rewards/non_finite"] == 2.0
    assert "NaN or infinity" in caplog.text


def test_rows_without_golden_answers_are_counted_with_one_warning(caplog):
    spec = RewardSpec([RewardTerm(name="em"), RewardTerm(name="f1"), RewardTerm(name="format")])
    rows = [traj("<answer>Paris</answer>", golds=()) for _ in range(3)] + [traj("<answer>Paris</answer>")]
    with caplog.at_level(logging.WARNING):
        totals = spec.score(rows)
    assert totals == [1.0, 1.0, 1.0, 3.0]
    assert rows[0].reward_errors == {
        "em": "missing_field: golden_answers",
        "f1": "missing_field: golden_answers",
    }
    assert reward_metrics(rows)["rewards/missing_field"] == 6.0
    warnings = [r.getMessage() for r in caplog.records if "golden_answers" in r.getMessage()]
    assert len(warnings) == 2 and "'em' needs the dataset field 'golden_answers'" in warnings[0]
    # the aliases Trajectory.golden_answers reads count as present
    aliased = Trajectory(messages=rows[3].messages, row={"solution": "Paris"})
    spec.score([aliased])
    assert aliased.reward_errors == {} and aliased.rewards["em"] == 1.0


def test_a_required_field_holding_an_array_or_nan_is_read_not_raised():
    """A parquet row read through pandas holds numpy arrays and NaN: ``array in (None, "", [])`` raised
    "truth value of an array is ambiguous" out of scoring, losing the whole batch."""
    register_reward("needs_tags", requires=("tags",))(lambda trajectory: 1.0)
    spec = RewardSpec([RewardTerm(name="needs_tags", fallback=0.5)])
    rows = [traj("x") for _ in range(4)]
    for row, tags in zip(
        rows, [np.array(["a", "b"]), np.array(["a"]), np.array([]), float("nan")], strict=True
    ):
        row.row["tags"] = tags
    assert spec.score(rows) == [1.0, 1.0, 0.5, 0.5]
    assert [r.reward_errors for r in rows[2:]] == [{"needs_tags": "missing_field: tags"}] * 2


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("{name: em, weight: .nan}", "reward.0.weight"),
        ("{name: em, weight: .inf}", "reward.0.weight"),
        ("{name: em, timeout_s: .inf}", "reward.0.timeout_s"),
        ("{name: em, timeout_s: 0}", "reward.0.timeout_s"),
        ("{name: em, fallback: .nan}", "reward.0.fallback"),
        ("{name: em, per_turns: true}", "reward.0.per_turns"),
    ],
)
def test_non_finite_and_unknown_reward_fields_fail_at_load(tmp_path, entry, field):
    path = tmp_path / "env.yaml"
    path.write_text(f"reward:\n  - {entry}\n")
    with pytest.raises(EnvConfigError, match=field.replace(".", r"\.")):
        load_env_config(path)


@pytest.mark.parametrize(
    ("row", "golds"),
    [
        ({"golden_answers": 2}, ["2"]),  # a GSM8K-style number
        ({"solution": 2}, ["2"]),
        ({"answer": 3.5}, ["3.5"]),
        ({"golden_answers": [2, None, "", "two"]}, ["2", "two"]),  # empty entries do not count
        ({"golden_answers": ["", None]}, []),  # so this row has none (counted as missing_field)
        # an empty column does not hide the next one (it scored 0 with missing_field)
        ({"golden_answers": [], "solution": 2}, ["2"]),
        ({"golden_answers": " ", "answer": ["", "2"]}, ["2"]),
        ({"golden_answers": [None], "solution": "", "answers": [[2]]}, ["2"]),
        # nested lists and SQuAD-style dicts are read, never str() of the container ("[2, 'two']")
        ({"golden_answers": [[2, "two"]]}, ["2", "two"]),
        ({"golden_answers": [{"text": 2, "answer_start": 0}, {"answer": ["two"]}]}, ["2", "two"]),
        ({"answers": {"text": [2, "two"], "answer_start": [0, 4]}}, ["2", "two"]),
        ({"golden_answers": [{"start": 0}], "solution": 2}, ["2"]),  # an unreadable dict is no answer
    ],
)
def test_golden_answers_of_any_json_type_score_instead_of_crashing_the_batch(row, golds):
    t = Trajectory(messages=[{"role": "assistant", "content": "<answer>2</answer>"}], row=row)
    assert t.golden_answers == golds
    other = traj("<answer>Paris</answer>")
    assert RewardSpec([RewardTerm(name="em")]).score([t, other]) == [float(golds[:1] == ["2"]), 1.0]


_answer = st.text(st.characters(codec="utf-8"), max_size=8)
_nested = st.recursive(
    _answer | st.integers(),
    lambda inner: st.lists(inner, max_size=3) | st.builds(lambda v: {"text": v, "answer_start": 0}, inner),
    max_leaves=8,
)


def _leaves(value):
    if isinstance(value, dict):
        return _leaves(value["text"])
    if isinstance(value, list):
        return [leaf for entry in value for leaf in _leaves(entry)]
    return [str(value).strip()] if str(value).strip() else []


@settings(max_examples=200, deadline=None)
@given(golds=_nested, empty=st.sampled_from([None, [], "", "  ", [None, ""], [[]]]))
def test_golden_answers_are_the_leaves_of_any_nesting_and_an_empty_column_hides_nothing(golds, empty):
    """The same answers, however a dataset nests them, and never a container's repr as an answer."""
    leaves = _leaves(golds)
    assert Trajectory(messages=[], row={"golden_answers": golds}).golden_answers == leaves
    fallback = Trajectory(messages=[], row={"golden_answers": empty, "solution": golds})
    assert fallback.golden_answers == leaves


class _BadFloat:
    def __float__(self):
        return 1 / 0


def test_returns_float_cannot_read_fall_back_instead_of_crashing_the_batch():
    register_reward("huge")(lambda trajectory: 10**400)  # OverflowError
    register_reward("bad_float")(lambda trajectory: _BadFloat())  # ZeroDivisionError
    register_reward("huge_steps", per_turn=True)(
        lambda trajectory: [10**400] * len(trajectory.assistant_turns)
    )
    spec = RewardSpec([RewardTerm(name=n) for n in ("em", "huge", "bad_float", "huge_steps")])
    t = traj("<answer>Paris</answer>")
    assert spec.score([t]) == [1.0]
    assert t.reward_errors == {
        "huge": "error: OverflowError",
        "bad_float": "error: ZeroDivisionError",
        "huge_steps": "error: OverflowError",
    }


def test_a_reward_that_exits_or_cancels_itself_costs_only_its_score():
    import sys

    register_reward("exits")(lambda trajectory: sys.exit(3))  # in a daemon thread

    @register_reward("cancels")
    async def cancels(trajectory):
        raise asyncio.CancelledError

    spec = RewardSpec([RewardTerm(name=n) for n in ("em", "exits", "cancels")])
    t = traj("<answer>Paris</answer>")
    assert spec.score([t]) == [1.0]
    assert t.reward_errors == {"exits": "error: RuntimeError", "cancels": "error: CancelledError"}


def test_cancelling_the_scoring_itself_still_cancels_it():
    @register_reward("forever")
    async def forever(trajectory):
        await asyncio.sleep(3600)

    spec = RewardSpec([RewardTerm(name="forever", timeout_s=3600)])

    async def cancel_soon():
        task = asyncio.ensure_future(spec.ascore([traj("x")]))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(cancel_soon(), 10))


def test_reward_args_the_function_cannot_take_fail_at_load(tmp_path):
    (tmp_path / "kw.py").write_text(
        "def scaled(trajectory, alpha=1.0):\n    return alpha\n\ndef needs(trajectory, k):\n    return k\n"
    )
    cases = [
        (
            RewardTerm(name="tool_use", args={"max_callz": 2}),
            r"reward\[0\]\.args: .*unexpected keyword argument 'max_callz'",
        ),
        (
            RewardTerm(name="kw.py:scaled", args={"alhpa": 2}),
            r"reward\[0\]\.args: .*'alhpa'.*\(trajectory, alpha=1\.0\)",
        ),
        (RewardTerm(name="kw.py:needs"), r"reward\[0\]\.args: missing a required argument: 'k'"),
    ]
    for term, message in cases:
        with pytest.raises(ValueError, match=message):
            RewardSpec([term], base_dir=tmp_path)
    assert RewardSpec([RewardTerm(name="kw.py:scaled", args={"alpha": 2})], base_dir=tmp_path).score(
        [traj("x")]
    ) == [2.0]


@pytest.mark.parametrize(
    ("source", "cause"),
    [
        ("def r(trajectory:\n    return 1\n", "SyntaxError"),
        ("raise RuntimeError('no GPU here')\n", "RuntimeError: no GPU here"),
        (
            "import sys\nsys.exit(0)\n",
            r"ImportError: .*broken\.py called sys\.exit\(0\)",
        ),  # the run ended, rc 0
    ],
)
def test_a_reward_file_that_fails_at_import_is_named_at_load(tmp_path, source, cause):
    (tmp_path / "broken.py").write_text(source)
    with pytest.raises(ValueError, match=rf"reward\[1\]\.name \('broken\.py:r'\): {cause}"):
        RewardSpec([RewardTerm(name="em"), RewardTerm(name="broken.py:r")], base_dir=tmp_path)


def test_two_terms_of_one_name_keep_their_own_scores_and_total_is_reserved():
    register_reward("half")(lambda trajectory: 0.5)
    spec = RewardSpec(
        [RewardTerm(name="half"), RewardTerm(name="em", weight=2.0), RewardTerm(name="half", weight=3.0)]
    )
    t = traj("<answer>Paris</answer>")
    assert spec.names == ["half", "em", "half_2"]
    assert spec.score([t]) == [0.5 + 2.0 + 1.5]
    assert t.rewards == {"half": 0.5, "em": 1.0, "half_2": 0.5, "total": 4.0}
    with pytest.raises(ValueError, match=r"reward\[0\]\.name: 'total' is the weighted sum's own key"):
        RewardSpec([RewardTerm(name="total")])


def test_a_score_that_overflows_once_weighted_falls_back_as_non_finite():
    register_reward("near_max")(lambda trajectory: 1e308)
    register_reward("near_max_steps", per_turn=True)(
        lambda trajectory: [1e308] * len(trajectory.assistant_turns)
    )
    spec = RewardSpec(
        [
            RewardTerm(name="em"),
            RewardTerm(name="near_max", weight=10.0),
            RewardTerm(name="near_max_steps", weight=10.0),
        ]
    )
    t = three_turns()
    [total] = spec.score([t])
    assert math.isfinite(total) and math.isfinite(sum(t.turn_rewards["total"]))
    assert t.reward_errors["near_max"] == "non_finite" and t.reward_errors["near_max_steps"] == "non_finite"
    assert RewardSpec([RewardTerm(name="near_max")]).score([t]) == [1e308]  # unweighted it is a number


def test_finite_scores_whose_sum_overflows_fall_back_as_non_finite_instead_of_an_infinite_total():
    register_reward("near_max")(lambda trajectory: 1e308)
    register_reward("near_max_steps", per_turn=True)(
        lambda trajectory: [1e308] * len(trajectory.assistant_turns)
    )
    # each weighted score is a number; their sums (the total, each turn's total) are past float's range
    spec = RewardSpec([RewardTerm(name=name) for name in ("near_max", "near_max", "near_max_steps") * 2])
    trajectories = [three_turns(), three_turns()]
    totals = spec.score(trajectories)
    for t in trajectories:
        assert t.rewards["total"] == 0.0 and t.turn_rewards["total"] == [0.0, 0.0, 0.0]  # the fallbacks
        assert t.rewards["near_max"] == 1e308 and t.turn_rewards["near_max_steps"] == [1e308] * 3
        assert t.reward_errors == {"total": "non_finite: the weighted sum, a turn's weighted sum"}
    assert totals == [0.0, 0.0] and spec.failures["non_finite"] == spec.errors == 2
    assert reward_metrics(trajectories)["rewards/non_finite"] == 2.0
    # the per-turn sum alone overflowing falls back alone: these turns average 0
    register_reward("swinging", per_turn=True)(lambda trajectory: [1e308, -1e308, 0.0])
    spec = RewardSpec([RewardTerm(name="em"), RewardTerm(name="swinging"), RewardTerm(name="swinging")])
    [total] = spec.score([t])
    assert total == t.rewards["total"] == 1.0
    assert t.turn_rewards["total"] == [0.0] * 3 and t.reward_errors == {
        "total": "non_finite: a turn's weighted sum"
    }
