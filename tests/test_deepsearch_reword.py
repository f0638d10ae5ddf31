"""examples/deepsearch/reword.py: GRPO's questions reworded in wordings the robustness check never uses."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from swift_rlfactory.eval.shifts import registered

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "deepsearch"))

import reword  # noqa: E402

POOL = ROOT / "examples" / "deepsearch" / "data" / "pool.jsonl"
# the phrases the built-in shifts write (eval/shifts.py): a training rewording must use none of them
SHIFT_PHRASES = ("Tell me", "I was wondering", "Quick question", "Could you help", "I'd like to know", "Name ",
                 "Which person", "What exactly", "In what place", "At what time", "What number of", "completes")  # fmt: skip


def question(row: dict) -> str:
    return row["messages"][-1]["content"]


def test_every_family_is_reworded_and_nothing_but_the_question_changes(tmp_path: Path):
    out = tmp_path / "pool.jsonl"
    reword.main([str(POOL), str(out), "--share", "1", "--seed", "3"])
    rows = [json.loads(line) for line in POOL.read_text().splitlines()]
    done = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(done) == len(rows)
    families = {row["family"] for row, new in zip(rows, done, strict=True) if "rewording" in new}
    assert families == {row["family"] for row in rows}  # every family of the pool has a rewording
    assert sum("rewording" in new for new in done) > 0.95 * len(rows)
    for row, new in zip(rows, done, strict=True):
        if "rewording" not in new:
            assert new == row
            continue
        assert {k: v for k, v in new.items() if k != "rewording"} == {**row, "messages": new["messages"]}
        assert new["messages"][:-1] == row["messages"][:-1]
        assert question(new) != question(row) and not any(p in question(new) for p in SHIFT_PHRASES)
        # an answer never leaks in, and the clue of the question is all still there
        assert row["clue"].split("___")[-1].strip(' ."?')[-20:] in question(new)


def test_rewordings_are_seeded_and_none_is_a_shift_of_the_question():
    rows = [json.loads(line) for line in POOL.read_text().splitlines()][:200]
    again = [reword.reword_row(row, 0, 0.5) for row in rows]
    assert again == [reword.reword_row(row, 0, 0.5) for row in rows]  # the same bytes every time
    assert again != [reword.reword_row(row, 1, 0.5) for row in rows]
    share = sum("rewording" in r for r in again) / len(rows)
    assert 0.35 < share < 0.65
    for row, new in zip(rows, again, strict=True):
        if "rewording" in new:
            shifted = {
                shift.apply(question(row), seed) for shift in registered().values() for seed in range(3)
            }
            assert question(new) not in shifted


def test_a_question_no_rule_knows_is_left_as_it_was():
    assert reword.reword("Where is the Eiffel Tower?", random.Random(0)) is None
    row = {
        "messages": [{"role": "user", "content": "Where is the Eiffel Tower?"}],
        "golden_answers": ["Paris"],
    }
    assert reword.reword_row(row, 0, 1.0) == row
