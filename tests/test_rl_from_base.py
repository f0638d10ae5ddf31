"""The RL-from-base task (examples/arithmetic): its data, its tool and what its reward pays for."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import shutil
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from swift_rlfactory.bundled.calculator.tools import calculate
from swift_rlfactory.data.qa import as_question
from swift_rlfactory.env.environment import Environment
from swift_rlfactory.rollout.episode import Generation, run_episode
from swift_rlfactory.tools.calls import ToolCall

HERE = Path(__file__).resolve().parents[1] / "examples" / "arithmetic"


def data_file(split: str) -> Path:
    """A split's file; the mix and chain splits are not committed and are built on first use (seed 0)."""
    path = HERE / "data" / f"{split}.jsonl"
    if not path.exists():
        load_builder().main(["--out", str(HERE / "data"), "--ood", "0"])
    return path


def rows(split: str) -> list[dict]:
    return [json.loads(line) for line in data_file(split).read_text().splitlines()]


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


@pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed (CI installs it)"
)
@pytest.mark.timeout(120)
def test_program_environment_runs_the_program_sandboxed_and_says_what_to_do_next():
    """env_python.yaml: the model writes a program with a variable per quantity instead of one expression;
    the result that comes back names the answer to copy, as env_hint.yaml's calculator does."""
    row = rows("heldout")[0]
    answer = row["solution"]
    program = f"parts = [{row['expression']}]\nprint(parts[0])"
    call = json.dumps({"name": "run_python", "arguments": {"code": program}})
    with Environment.load(HERE / "env_python.yaml") as env:
        [ran, silent, crashed, escaped] = env.executor.execute(
            [
                ToolCall("run_python", {"code": program}),
                ToolCall("run_python", {"code": "x = 1"}),
                ToolCall("run_python", {"code": "print(1 / 0)"}),
                ToolCall("run_python", {"code": "open('/etc/answer', 'w')"}),  # the root is read-only
            ]
        )
        assert ran.ok and ran.observation == (
            f"{answer}\nIf this is the final result, reply with <answer>{answer}</answer>."
        )
        assert silent.ok and silent.observation == "(no output): print() the result"
        assert (
            not crashed.ok
            and "ZeroDivisionError" in crashed.observation
            and "<answer>" not in crashed.observation
        )
        assert not escaped.ok and "Read-only file system" in escaped.observation
        right = scored(env, [f"<tool_call>\n{call}\n</tool_call>", f"<answer>{answer}</answer>"])
        from_memory = scored(env, [f"<answer>{answer}</answer>"])
    assert right["calls"] == 1 and right["total"] == pytest.approx(1.3)
    assert right["total"] > from_memory["total"]


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
        # as the builder writes it now: "... in the plot." is a sentence, not "... in the plot.?"
        question = row["messages"][0]["content"]
        assert as_question(question) == question and not question.endswith(".?")
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
        for name in ("train", "heldout", "ood", "train_mix", "heldout_mix", "heldout_chain")
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
    """Re-running the generator (without the reasoning-gym OOD split) writes every other file byte for byte:
    the committed ones, and the ones built on first use (the same seed twice, the same bytes)."""
    builder = load_builder()
    builder.main(["--out", str(tmp_path), "--ood", "0"])
    for name in ("train", "heldout", "train_mix", "heldout_mix", "heldout_chain", "train_chain"):
        assert (tmp_path / f"{name}.jsonl").read_bytes() == data_file(name).read_bytes(), name


# A reader of the chain families' sentences, written apart from build_data.py: it solves a story from its
# text alone, so a generator whose expression says something other than its sentences fails here.
_COUNT = r"(\d+|one|two|three|four|five|six|seven|eight|nine|ten)"
_K = r"(twice|three times|four times|\d+ times)"
_PART = {"half": 2, "a third": 3, "a quarter": 4}
_WORD_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10}  # fmt: skip


def _n(text: str) -> int:
    return int(text) if text.isdigit() else _WORD_NUMBERS[text]


def _k(text: str) -> int:
    return {"twice": 2, "three times": 3, "four times": 4}.get(text) or int(text.split()[0])


def _unknown(values: dict[str, float], x: str, y: str, times: float = 1, plus: float = 0) -> None:
    """``x = y * times + plus``: solved for ``x`` when ``y`` is known, else for ``y``; one new amount each."""
    if y in values and x not in values:
        values[x] = values[y] * times + plus
    elif x in values and y not in values:
        values[y] = (values[x] - plus) / times
    else:
        raise AssertionError(f"a relation between {x} and {y} gives no new amount")


def solve_chain(question: str) -> float:
    """The answer of a ``chain`` or ``prices`` story, from its sentences."""
    name = r"(?:[Aa]n? )?([A-Z]?[a-z]+)"
    verb = r"(?:has|costs)"
    values: dict[str, float] = {}
    order: list[str] = []
    asked = bill = basket = basket_bought = None
    for sentence in re.split(r"(?<=[.?]) ", question):
        s = sentence.rstrip(".?")
        if re.search(r"years old|cousins|degrees outside|floor|opened|minutes", s):
            continue  # the distractors: a number the answer does not use
        if m := re.fullmatch(rf"{name} {verb} (\d+) [a-z]+", s):
            values[m[1].lower()] = int(m[2])
        elif m := re.fullmatch(rf"{name} {verb} {_K} as (?:much|many [a-z]+) as {name}", s):
            _unknown(values, m[1].lower(), m[3].lower(), times=_k(m[2]))
        elif m := re.fullmatch(
            rf"{name} {verb} (half|a third|a quarter) as (?:much|many [a-z]+) as {name}", s
        ):
            _unknown(values, m[1].lower(), m[3].lower(), times=Fraction(1, _PART[m[2]]))
        elif m := re.fullmatch(rf"{name} {verb} (\d+) [a-z]+ (more|fewer|less) than {name}", s):
            _unknown(values, m[1].lower(), m[4].lower(), plus=int(m[2]) if m[3] == "more" else -int(m[2]))
        elif m := re.fullmatch(rf"{name} {verb} as (?:much|many [a-z]+) as {name} and {name} together", s):
            values[m[1].lower()] = values[m[2].lower()] + values[m[3].lower()]
        elif m := re.fullmatch(r"[A-Z][a-z]+ buys (.+) and pays with (\d+) dollars", s):
            basket_bought, bill = m[1], int(m[2])
        elif s.startswith(("How ", "What ")):
            asked = s
        else:
            raise AssertionError(f"unread sentence: {s!r}")
        for key in values:
            if key not in order:
                order.append(key)
    assert asked, question
    if bill is not None:
        assert re.fullmatch(r"How many dollars of change does [A-Z][a-z]+ get", asked), asked
        basket = basket_bought
    elif m := re.fullmatch(r"How many dollars does [A-Z][a-z]+ pay for (.+)", asked):
        basket = m[1]
    if bill is not None or basket:
        cost = 0
        for count, item in re.findall(rf"{_COUNT} ([a-z]+)", basket):
            key = next(
                k for k in values if item in (k, k + "s", k + "es") or (k, item) == ("scarf", "scarves")
            )
            cost += _n(count) * values[key]
        return bill - cost if bill is not None else cost
    if m := re.fullmatch(r"How many more [a-z]+ does ([A-Z][a-z]+) have than ([A-Z][a-z]+)", asked):
        return values[m[1].lower()] - values[m[2].lower()]
    if m := re.fullmatch(r"How many [a-z]+ do ([A-Z][a-z]+) and ([A-Z][a-z]+) have together", asked):
        return values[m[1].lower()] + values[m[2].lower()]
    if m := re.fullmatch(r"How many [a-z]+ does ([A-Z][a-z]+) have", asked):
        return values[m[1].lower()]
    assert re.search(r"altogether|in all|total number", asked), asked
    return sum(values[k] for k in order)


def test_chain_stories_are_solved_from_their_text_alone():
    """Every committed chain row: a reader that never sees the expression gets the committed answer."""
    chain_rows = [
        r for r in rows("heldout_chain") + rows("train_chain") if r["family"] in ("chain", "prices")
    ]
    assert len(chain_rows) == 100 + 666
    for row in chain_rows:
        question = row["messages"][0]["content"]
        assert solve_chain(question) == int(row["solution"]), question
        assert row["solution"] == calculate(row["expression"])


def test_chain_splits_mix_a_third_of_chains_into_train_mix():
    train_chain, heldout_chain = rows("train_chain"), rows("heldout_chain")
    # the question is the last sentence (qa_row adds "?" to a text that does not end with one)
    assert all(r["messages"][0]["content"].endswith("?") for r in train_chain + heldout_chain)
    assert not [r for r in train_chain + heldout_chain if ".?" in r["messages"][0]["content"]]
    assert (len(train_chain), len(heldout_chain)) == (2000, 100)
    assert Counter(r["family"] for r in heldout_chain) == {"chain": 50, "prices": 50}
    counts = Counter(r["family"] for r in train_chain)
    assert counts["chain"] == counts["prices"] == 333
    mix = {r["messages"][0]["content"] for r in rows("train_mix")}
    others = [r for r in train_chain if r["family"] not in ("chain", "prices")]
    assert len(others) == 2000 - 666 and all(r["messages"][0]["content"] in mix for r in others)
    # chains are not one template: depth, the kind of question, the relations and reversed relations vary
    chains = [r for r in train_chain + heldout_chain if r["family"] in ("chain", "prices")]
    assert {r["steps"] for r in chains} >= {2, 3, 4, 5, 6}
    texts = [r["messages"][0]["content"] for r in chains]
    for phrase in (
        "altogether",
        "together?",
        "How many more",
        "change",
        "as much as",
        "fewer than",
        "half as",
    ):
        assert sum(phrase in t for t in texts) >= 10, phrase
