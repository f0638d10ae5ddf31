"""Phrasing shifts (swift_rlfactory/eval/shifts.py): properties of every registered shift, the built-ins on
real questions, and users' own shifts by decorator, by ``module:function`` and by a YAML list."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swift_rlfactory.eval import shifts
from swift_rlfactory.eval.shifts import Shift, registered, resolve_shifts, shift_row

from .conftest import ROOT

BUILT_INS = ["wh_last", "paraphrase", "polite", "lowercase", "typos", "imperative"]
WORDS = st.text(alphabet=string.ascii_letters + "  ,'-_\"é0123456789", min_size=1, max_size=80)
QUESTIONS = st.one_of(
    st.text(max_size=120),
    st.builds(
        lambda wh, be, rest, end: f"{wh} {be} {rest}{end}",
        st.sampled_from(["What", "Which", "Who", "where", "When", "How many", "Which city", "Name"]),
        st.sampled_from(["is", "are", "was", "were", "did", "the name of"]),
        WORDS,
        st.sampled_from(["?", "", ".", " ?", "?\n"]),
    ),
)
SHIFTS = st.sampled_from(sorted(registered()))


def real_questions() -> list[str]:
    path = ROOT / "examples" / "deepsearch" / "data" / "test.jsonl"
    return [json.loads(line)["messages"][-1]["content"] for line in path.read_text().splitlines()]


def test_the_built_in_shifts_are_registered_in_order():
    assert list(registered())[: len(BUILT_INS)] == BUILT_INS
    assert all(s.description for s in registered().values())  # --help and the docs list them


@settings(max_examples=300, deadline=None)
@given(name=SHIFTS, question=QUESTIONS, seed=st.integers(0, 2**32))
def test_a_shift_is_deterministic_for_a_seed_and_never_empty_or_unchanged(
    name: str, question: str, seed: int
):
    shift = registered()[name]
    out = shift.apply(question, seed)
    assert out == shift.apply(question, seed)
    if out is not None:
        assert out.strip() and out == " ".join(out.split())
        assert out != " ".join(question.split())


@settings(max_examples=300, deadline=None)
@given(name=SHIFTS, question=QUESTIONS, seed=st.integers(0, 2**32))
def test_an_idempotent_shift_leaves_its_own_output_as_it_is(name: str, question: str, seed: int):
    shift = registered()[name]
    out = shift.apply(question, seed)
    if shift.idempotent and out is not None:
        assert shift.apply(out, seed) is None  # None: nothing left to change
        assert shift.apply(out, seed + 1) is None


@settings(max_examples=200, deadline=None)
@given(name=SHIFTS, question=QUESTIONS, golden=st.lists(st.text(max_size=20), min_size=1, max_size=3))
def test_a_shifted_row_keeps_every_column_but_the_question(name: str, question: str, golden: list[str]):
    row = {
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": question}],
        "golden_answers": golden,
        "solution": golden[0],
        "hops": 2,
        "support": ["A", "B"],
    }
    before = json.loads(json.dumps(row))
    shifted = shift_row(row, registered()[name], seed=3)
    assert row == before  # the original row is not touched
    if shifted is not None:
        assert {k: v for k, v in shifted.items() if k != "messages"} == {
            k: v for k, v in row.items() if k != "messages"
        }
        assert shifted["messages"][0] == row["messages"][0]
        assert shifted["messages"][-1]["content"] == registered()[name].apply(question, 3)


def test_a_row_whose_question_is_not_text_is_not_shifted():
    row = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "What is X?"}]}],
        "solution": "x",
    }
    assert shift_row(row, registered()["lowercase"]) is None
    assert shift_row({"messages": [], "solution": "x"}, registered()["lowercase"]) is None


@pytest.mark.parametrize(
    ("name", "question", "expected"),
    [
        ("wh_last", "What is the capital of France?", "The capital of France is what?"),
        ("wh_last", "Which city is the capital of France?", "The capital of France is which city?"),
        ("wh_last", "How many legs does a spider have?", None),
        ("paraphrase", "What is the name of the capital of France?", "Name the capital of France."),
        ("paraphrase", "Name the capital of France.", "What is the name of the capital of France?"),
        ("paraphrase", "Who was the first president?", "Which person was the first president?"),
        ("paraphrase", "How many legs does a spider have?", "What number of legs does a spider have?"),
        ("paraphrase", "The summary of X names a city. What is it?", None),
        ("lowercase", "Who wrote \"O'Brien's F-16\", 3.5 times?", "who wrote o'brien's f-16 3.5 times"),
        (
            "lowercase",
            'What name fills the blank in "___ are fish."?',
            "what name fills the blank in ___ are fish",
        ),
        (
            "imperative",
            "What is the name of the capital of France?",
            "Tell me the name of the capital of France.",
        ),
        (
            "imperative",
            "Which city is the capital of France?",
            "Tell me which city is the capital of France.",
        ),
        ("imperative", "The summary of X names a city. What is it?", None),
    ],
)
def test_the_built_in_shifts_on_examples(name: str, question: str, expected: str | None):
    assert registered()[name].apply(question) == expected


def test_polite_and_typos_depend_on_the_seed_and_keep_the_question():
    question = real_questions()[0]
    polite = {registered()["polite"].apply(question, seed) for seed in range(20)}
    assert len(polite) > 1 and all(p.endswith(question[1:]) for p in polite)
    assert registered()["polite"].apply(next(iter(polite))) is None  # never two openings
    typos = {registered()["typos"].apply(question, seed) for seed in range(20)}
    assert len(typos) > 1
    for typo in typos:  # one edit of a few letters, in lowercase words only
        assert len(typo.split()) == len(question.split())
        changed = [(a, b) for a, b in zip(question.split(), typo.split(), strict=True) if a != b]
        assert changed and all(a.islower() and abs(len(a) - len(b)) <= 1 for a, b in changed)


def test_every_built_in_applies_to_part_of_a_real_split():
    questions = real_questions()
    for name in BUILT_INS:
        applied = sum(registered()[name].apply(q) is not None for q in questions)
        assert applied >= len(questions) // 4, (name, applied)


def test_users_register_shifts_by_decorator_module_path_and_yaml(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(shifts, "_REGISTRY", dict(shifts._REGISTRY))

    @shifts.register_shift("shout", idempotent=True)
    def shout(question: str, rng: random.Random) -> str | None:
        """Upper case."""
        return question.upper()

    assert [s.name for s in resolve_shifts("all")][-1] == "shout"
    assert resolve_shifts("shout,lowercase")[0] == Shift("shout", shout, idempotent=True)
    (tmp_path / "mine.py").write_text(
        "def reverse_words(question, rng):\n"
        "    '''The words in reverse order.'''\n"
        "    return ' '.join(reversed(question.split()))\n"
    )
    (tmp_path / "shifts.yaml").write_text("- typos\n- mine.py:reverse_words\n")
    chosen = resolve_shifts("shifts.yaml,polite", base_dir=tmp_path)
    assert [s.name for s in chosen] == ["typos", "reverse_words", "polite"]
    assert chosen[1].apply("a b c") == "c b a" and chosen[1].description == "The words in reverse order."
    with pytest.raises(ValueError, match="already registered"):
        shifts.register_shift("shout")(lambda q, rng: q)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nonsense", "unknown shift 'nonsense'"),
        (",", "names no shift"),
        ("os:not_there", "has no function"),
        ("missing.yaml", "not a YAML file"),
    ],
)
def test_a_bad_shifts_value_fails_naming_it(spec: str, message: str, tmp_path: Path):
    with pytest.raises(ValueError, match=message):
        resolve_shifts(spec, base_dir=tmp_path)
