"""The needless-call reward (swift_rlfactory/rewards/needless_calls.py): a call made after the answer was in
an observation is charged, a call the answer still needed is not; on hand-made trajectories, through the
reward spec, and on DeepSearch's real search."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from swift_rlfactory.env.environment import Environment
from swift_rlfactory.retrieval.format import parse_hits
from swift_rlfactory.rewards.needless_calls import (
    build,
    contains_answer,
    needless_by_turn,
    needless_calls,
    turn_needless_calls,
)
from swift_rlfactory.rewards.registry import RewardSpec
from swift_rlfactory.rewards.rules import normalize_answer
from swift_rlfactory.rewards.terms import RewardTerm
from swift_rlfactory.rollout.episode import Generation, run_episode
from swift_rlfactory.runtime.user_code import import_target
from swift_rlfactory.trajectory import Trajectory

from .conftest import ROOT

DEEPSEARCH = ROOT / "examples" / "deepsearch"


def trajectory(observations: list[list[str]], answer: str = "Paris", golden: str = "Paris") -> Trajectory:
    """A trajectory of one search turn per item of ``observations`` (each the observations of that turn's
    calls), then the answer turn."""
    messages = [{"role": "user", "content": "Q?"}]
    calls = []
    for turn, seen in enumerate(observations, start=1):
        messages.append({"role": "assistant", "content": "<tool_call>...</tool_call>"})
        for text in seen:
            calls.append(
                {"tool": "search", "arguments": {}, "observation": text, "error": None, "turn": turn}
            )
            messages.append({"role": "tool", "content": text})
    messages.append({"role": "assistant", "content": f"<answer>{answer}</answer>"})
    return Trajectory(messages, calls, turns=len(observations) + 1, row={"golden_answers": [golden]})


def test_a_search_after_the_answer_appeared_is_charged():
    single = trajectory([["Doc 1(Title: Paris) the capital of France"], ["Doc 1(Title: Lyon) a city"]])
    assert needless_by_turn(single) == [0, 1, 0]
    assert turn_needless_calls(single) == [0.0, -1.0, 0.0] and needless_calls(single) == -1.0


def test_a_second_search_the_answer_needed_is_not_charged():
    two_hop = trajectory([["Doc 1(Title: Eiffel Tower) a tower in a city"], ["Doc 1(Title: Paris) a city"]])
    assert needless_by_turn(two_hop) == [0, 0, 0] and needless_calls(two_hop) == 0.0
    never = trajectory([["nothing"], ["still nothing"]])
    assert turn_needless_calls(never) == [0.0, 0.0, 0.0]


def test_calls_of_the_answers_own_turn_failed_calls_and_rows_without_an_answer():
    beside = trajectory([["Doc 1(Title: Paris)", "Doc 1(Title: Rome)"]])  # issued together: not charged
    assert needless_by_turn(beside) == [0, 0]
    failed = trajectory([["Paris"], ["Doc"]])
    failed.tool_calls[0]["error"] = "timeout"  # an observation of a failed call is not a result
    assert needless_by_turn(failed) == [0, 0, 0]
    no_answer = trajectory([["Paris"], ["Doc"]])
    no_answer.row = {}
    assert needless_calls(no_answer) == 0.0


def test_penalty_and_its_floor():
    three = trajectory([["Paris"], ["a", "b"], ["c"]])
    assert needless_by_turn(three) == [0, 2, 1, 0]
    assert turn_needless_calls(three, penalty=0.25) == [0.0, -0.5, -0.25, 0.0]
    assert needless_calls(three, penalty=0.25) == -0.75 and needless_calls(three) == -1.0  # at least -1


@pytest.mark.parametrize(
    ("observation", "answers", "holds"),
    [
        ('Doc 1(Title: "Paris") The capital.', ["paris"], True),
        ("The city of Parisians", ["Paris"], False),  # whole words only
        ("It has 1,500 people", ["1500"], True),  # numbers keep their value, as in EM
        ("The O’Brien–Smith Act", ["OBrienSmith Act"], True),
        ("anything", [""], False),
    ],
)
def test_the_default_verifier_normalises_as_em(observation: str, answers: list[str], holds: bool):
    assert contains_answer(observation, answers) is holds


def test_a_verifier_the_environment_names(tmp_path: Path):
    (tmp_path / "verify.py").write_text(
        "def titled(observation, answers):\n    return 'Title: ' + answers[0] in observation\n"
    )
    single = trajectory([["Doc 1(Title: Paris)"], ["Doc"]])
    mentions = trajectory([["Paris is mentioned here"], ["Doc 1(Title: Paris)"]])
    made = build(per_turn=True)({"verifier": "verify.py:titled", "penalty": 0.5}, None, tmp_path)
    assert made(single) == [0.0, -0.5, 0.0] and made(mentions) == [0.0, 0.0, 0.0]
    assert turn_needless_calls(mentions) == [0.0, -1.0, 0.0]  # the default: a mention is the answer
    with pytest.raises(ValidationError):
        build(per_turn=False)({"penalty": -1}, None, tmp_path)
    with pytest.raises(ValueError, match="verifier 'verify.py:nothing'"):
        build(per_turn=False)({"verifier": "verify.py:nothing"}, None, tmp_path)
    # by name in an environment's reward (the registry's entries), its verifier a file of the env's folder
    spec = RewardSpec(
        [RewardTerm(name="needless_calls", weight=0.5), RewardTerm(name="turn_needless_calls", args={"verifier": "verify.py:titled"})],
        base_dir=tmp_path,
    )  # fmt: skip
    spec.score([single])
    assert single.rewards["needless_calls"] == -1.0 and single.turn_rewards["turn_needless_calls"] == [
        0.0,
        -1.0,
        0.0,
    ]
    spec.close()


def test_by_module_path_in_an_environments_reward():
    term = RewardTerm(name="swift_rlfactory.rewards.needless_calls:turn_needless_calls", per_turn=True)
    spec = RewardSpec([term, RewardTerm(name="swift_rlfactory.rewards.needless_calls:needless_calls")])
    single = trajectory([["Paris"], ["Doc"]])
    spec.score([single])
    assert single.turn_rewards[term.name] == [0.0, -1.0, 0.0]
    assert single.rewards["swift_rlfactory.rewards.needless_calls:needless_calls"] == -1.0
    spec.close()


@pytest.mark.timeout(120)
def test_deepsearch_a_second_search_is_charged_on_a_single_hop_question_only():
    """Real BM25 searches: a single-hop question searched twice after its article came back is charged;
    a two-hop question's second search, which brings back the answer's article, is not."""
    rows = [json.loads(line) for line in (DEEPSEARCH / "data" / "test.jsonl").read_text().splitlines()]
    titled = import_target("search_hit.py", DEEPSEARCH).answer_titled
    call = import_target("build_sft.py", DEEPSEARCH).call_text

    with Environment.load(DEEPSEARCH / "env_grpo.yaml") as env:

        def run(row: dict, queries: list[str]) -> Trajectory:
            replies = iter([*map(call, queries), f"<answer>{row['solution']}</answer>"])

            async def generate(messages):
                return Generation(next(replies))

            prompt = [{"role": "system", "content": env.system_prompt}, *row["messages"]]
            return asyncio.run(run_episode(prompt, generate, env.executor, env.max_turns, row=row))

        def answer_article(observation: str, row: dict) -> bool:
            return normalize_answer(row["solution"]) in map(normalize_answer, parse_hits(observation))

        single = next(r for r in rows if r["hops"] == 1)
        twice = run(single, [single["solution"], single["solution"] + " article"])
        assert answer_article(twice.tool_calls[0]["observation"], single)  # the first search found it
        assert turn_needless_calls(twice, verifier=titled) == [0.0, -1.0, 0.0]

        for row in (r for r in rows if r["hops"] == 2):
            bridge, answer = row["support"]
            episode = run(row, [bridge, answer])
            first, second = (c["observation"] for c in episode.tool_calls)
            if not answer_article(first, row) and answer_article(second, row):
                break  # the bridge search did not bring the answer's article: the second was needed
        else:
            pytest.fail("no two-hop test question needs its second search")
        assert turn_needless_calls(episode, verifier=titled) == [0.0, 0.0, 0.0]
        assert needless_calls(twice, verifier=f"{DEEPSEARCH}/search_hit.py:answer_titled") == -1.0  # by name
