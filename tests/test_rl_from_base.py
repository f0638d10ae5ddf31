"""The RL-from-base task (examples/arithmetic): its data, its tool and what its reward pays for."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

from swift_rlfactory.env.environment import Environment
from swift_rlfactory.envs.calculator.tools import calculate
from swift_rlfactory.rollout.episode import Generation, run_episode
from swift_rlfactory.tools.parsing import ToolCall

HERE = Path(__file__).resolve().parents[1] / "examples" / "arithmetic"


def rows(split: str) -> list[dict]:
    return [json.loads(line) for line in (HERE / "data" / f"{split}.jsonl").read_text().splitlines()]


def test_splits_are_balanced_disjoint_and_answered_by_the_tool():
    train, heldout = rows("train"), rows("heldout")
    assert (len(train), len(heldout)) == (2000, 300)
    for split in (train, heldout):
        counts = Counter(r["family"] for r in split)
        assert len(counts) == 8 and max(counts.values()) - min(counts.values()) <= 1
        for row in split:
            assert row["solution"] == row["golden_answers"][0] == calculate(row["expression"])
            assert row["solution"].isdigit() and row["steps"] >= 2
    questions = {r["messages"][0]["content"] for r in train}
    assert not questions & {r["messages"][0]["content"] for r in heldout}
    # Mental arithmetic does not get there: most answers have four or more digits.
    assert sum(len(r["solution"]) >= 4 for r in heldout) > 0.6 * len(heldout)


def scored(env: Environment, turns: list[str], row: dict | None = None) -> dict[str, float]:
    row = row or rows("heldout")[0]
    replies = iter(turns)

    async def generate(messages):
        return Generation(next(replies))

    prompt = [{"role": "system", "content": env.system_prompt}, *row["messages"]]
    trajectory = asyncio.run(run_episode(prompt, generate, env.executor, env.max_turns, row=row))
    total = env.reward.score([trajectory])[0]
    return {"total": total, **trajectory.rewards, "calls": len(trajectory.tool_calls)}


@pytest.mark.timeout(60)
def test_reward_pays_most_for_the_tool_and_the_right_number():
    row = rows("heldout")[0]
    expression, answer = row["expression"], row["solution"]
    call = json.dumps({"name": "calculate", "arguments": {"expression": expression}})
    with Environment.load(HERE / "env.yaml") as env:
        bare_json = scored(env, [call, f"<answer>{answer}</answer>"])  # how the base model writes calls
        tagged = scored(env, [f"<tool_call>\n{call}\n</tool_call>", f"<answer>{answer}</answer>"])
        from_memory = scored(env, [f"<answer>{answer}</answer>"])
        wrong = scored(env, [call, f"<answer>{int(answer) + 1}</answer>"])
        bad_call = scored(
            env, ['{"name": "calculate", "arguments": {"expression": "12 apples"}}', "<answer>12</answer>"]
        )
        no_answer = scored(env, [f"The answer is {answer}."])
    assert bare_json["calls"] == tagged["calls"] == 1
    assert bare_json["total"] == tagged["total"] == pytest.approx(1.3)
    assert bare_json["total"] > from_memory["total"] > wrong["total"] > bad_call["total"] > no_answer["total"]
    assert from_memory["calls"] == 0 and wrong["em"] == 0.0
    with Environment.load(HERE / "env_hint.yaml") as env:  # same task, the observation repeats the protocol
        [record] = env.executor.execute([ToolCall("calculate", {"expression": expression})])
        assert (
            record.observation
            == f"{answer}\nIf this is the final result, reply with <answer>{answer}</answer>."
        )
        assert scored(env, [call, f"<answer>{answer}</answer>"])["total"] == pytest.approx(1.3)


@pytest.mark.timeout(60)
def test_ood_split_is_gsm_symbolic_unseen_and_scored_by_em():
    """The OOD split (reasoning-gym's gsm_symbolic, never trained on) shares no question with ours."""
    ood = rows("ood")
    assert len(ood) == 200
    assert {r["family"] for r in ood} == {"gsm_symbolic"} and {r["steps"] for r in ood} == {None}
    for row in ood:
        assert row["solution"] == row["golden_answers"][0] and row["solution"].isdigit()
        assert str(int(row["solution"])) == row["solution"]  # no separators, no leading zeros
        assert "final answer" not in row["messages"][0]["content"]  # reasoning-gym's instruction is cut
    questions = [r["messages"][0]["content"] for r in ood]
    assert len(set(questions)) == len(questions)
    assert not set(questions) & {r["messages"][0]["content"] for r in rows("train") + rows("heldout")}
    row, answer = ood[0], ood[0]["solution"]
    call = json.dumps({"name": "calculate", "arguments": {"expression": f"{answer} * 1"}})
    with Environment.load(HERE / "env.yaml") as env:
        right = scored(env, [call, f"<answer>{answer}</answer>"], row)
        wrong = scored(env, [call, f"<answer>{int(answer) + 1}</answer>"], row)
    assert (right["em"], right["calls"], wrong["em"]) == (1.0, 1, 0.0)


def load_builder():
    """examples/arithmetic/build_data.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("arithmetic_build_data", HERE / "build_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mix_splits_have_24_balanced_families_answered_by_the_tool():
    train_mix, heldout_mix = rows("train_mix"), rows("heldout_mix")
    assert (len(train_mix), len(heldout_mix)) == (2000, 300)
    old = {r["family"] for r in rows("train")}
    train_counts = Counter(r["family"] for r in train_mix)
    heldout_counts = Counter(r["family"] for r in heldout_mix)
    assert len(train_counts) >= 24 and old < set(train_counts)
    assert set(heldout_counts) == set(train_counts) - old  # held-out: the new families only
    for counts in (train_counts, heldout_counts):
        assert max(counts.values()) - min(counts.values()) <= 1
    for row in train_mix + heldout_mix:
        assert row["solution"] == row["golden_answers"][0] == calculate(row["expression"])
        assert row["solution"].isdigit() and str(int(row["solution"])) == row["solution"]
        assert row["steps"] >= 1


def test_no_question_is_shared_between_any_two_splits():
    splits = {
        name: [r["messages"][0]["content"] for r in rows(name)]
        for name in ("train", "heldout", "ood", "train_mix", "heldout_mix")
    }
    for name, questions in splits.items():
        assert len(set(questions)) == len(questions), name
    names = list(splits)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not set(splits[a]) & set(splits[b]), (a, b)


def test_mix_phrasings_vary_within_a_family():
    """Each new family has several phrasings: question first and last, words for numbers, distractors."""
    old = {r["family"] for r in rows("heldout")}
    by_family: dict[str, list[str]] = {}
    for row in rows("heldout_mix") + rows("train_mix"):
        if row["family"] not in old:
            by_family.setdefault(row["family"], []).append(row["messages"][0]["content"])
    for family, questions in by_family.items():
        openings = {" ".join(q.split()[:2]) for q in questions}
        assert len(openings) >= 2, family  # at least two sentence shapes start the question
    everything = [q for qs in by_family.values() for q in qs]
    assert sum(q.startswith(("How ", "What ")) for q in everything) > 0.2 * len(everything)  # question first
    assert (
        sum(any(w in q for w in ("twice", "half", "a third", "a quarter", "dozen")) for q in everything) > 100
    )
    distracted = sum("years old." in q or "cousins." in q or "degrees outside" in q for q in everything)
    assert distracted > 0.1 * len(everything)


def test_build_data_reproduces_the_committed_files(tmp_path):
    """Re-running the generator (without the reasoning-gym OOD split) writes every other file byte for byte."""
    builder = load_builder()
    builder.main(["--out", str(tmp_path), "--ood", "0"])
    for name in ("train", "heldout", "train_mix", "heldout_mix"):
        assert (tmp_path / f"{name}.jsonl").read_bytes() == (HERE / "data" / f"{name}.jsonl").read_bytes(), (
            name
        )
