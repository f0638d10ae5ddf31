"""Evaluation files written outside this repository, in the common public QA formats.

An independent suite scores trained models on held-back question files in whatever shape they come in:
each format's question and every accepted answer (aliases included) must be read, and a row that cannot
be scored must stop the load naming the file, where in it, and what is missing, never score 0 unsaid.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from swift_rlfactory.answers import reference_answers
from swift_rlfactory.eval.runner import load_rows

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "examples" / "deepsearch"))
import eval_sets  # noqa: E402


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def write(path: Path, data: Any, *, lines: bool = True) -> Path:
    """``data`` as JSON Lines (a list of records) or one JSON document; gzip-compressed for ``.gz``."""
    text = "".join(json.dumps(r) + "\n" for r in data) if lines else json.dumps(data)
    path.write_bytes(gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode())
    return path


TRIVIAQA = {
    "Question": "Which planet is called red?",
    "QuestionId": "tc_1",
    "Answer": {
        "Value": "Mars",
        "Aliases": ["Mars", "The Red Planet"],
        "NormalizedAliases": ["mars", "red planet"],
        "Type": "WikipediaEntity",
    },
}
MUSIQUE = {"id": "2hop__1", "question": "Who founded X", "answer": "Ann", "answer_aliases": ["Ann Lee"]}
SQUAD = {
    "version": "v2.0",
    "data": [{"title": "T", "paragraphs": [{"context": "c", "qas": [
        {"id": "q1", "question": "What is X?", "answers": [{"text": "Y", "answer_start": 0}]},
    ]}]}],
}  # fmt: skip
SEARCH_R1 = {  # a Search-R1 parquet row as jsonl, its FlashRAG columns dropped: the question is the prompt
    "data_source": "nq",
    "prompt": user("Answer the question. Question: who wrote hamlet?"),
    "reward_model": {"style": "rule", "ground_truth": {"target": ["Shakespeare"]}},
    "extra_info": {"split": "test", "index": 0},
}
VERL = {  # verl's math rows: ground_truth is the answer itself
    "data_source": "openai/gsm8k",
    "question": "What is 2 + 2?",
    "answer": "2 + 2 = 4 #### 4",  # the worked solution, where the raw column survived the conversion
    "prompt": user("What is 2 + 2? Think step by step."),
    "reward_model": {"style": "rule", "ground_truth": "4"},
    "extra_info": {"split": "test", "index": 0},
}


@pytest.mark.parametrize(
    ("name", "data", "question", "answers"),
    [
        ("trivia.jsonl", [TRIVIAQA], "Which planet is called red?", ["Mars", "Mars", "The Red Planet", "mars", "red planet"]),
        ("trivia_hf.jsonl", [{"question": "Red one?", "answer": {"value": "Mars", "aliases": ["Red Planet"],
          "normalized_aliases": ["mars", "red planet"], "type": "WikipediaEntity"}}], "Red one?",
         ["Mars", "Red Planet", "mars", "red planet"]),
        ("musique.jsonl", [MUSIQUE], "Who founded X?", ["Ann", "Ann Lee"]),
        ("squad.json", SQUAD, "What is X?", ["Y"]),
        ("search_r1.jsonl", [SEARCH_R1], SEARCH_R1["prompt"][0]["content"], ["Shakespeare"]),
        ("verl.jsonl", [VERL], "What is 2 + 2?", ["4"]),
        ("nq.jsonl.gz", [{"question": "where is paris", "answer": ["France"]}], "where is paris?", ["France"]),
        ("hotpot.json.gz", [{"_id": "5a8b", "question": "Is it?", "answer": "yes", "level": "hard"}], "Is it?", ["yes"]),
    ],
)  # fmt: skip
def test_public_qa_formats_load_with_every_accepted_answer(
    tmp_path: Path, name: str, data: Any, question: str, answers: list[str]
) -> None:
    path = write(tmp_path / name, data, lines=".jsonl" in name)
    [row] = load_rows(path)
    assert row["messages"][-1]["content"] == question
    assert row["golden_answers"] == answers and row["solution"] == answers[0]


def test_aliases_count_for_rows_already_in_our_format() -> None:
    """The trajectory reads the same rule: a ``messages`` row keeping MuSiQue's or TriviaQA's answer
    columns is scored against every alias, not only the first answer."""
    assert reference_answers({"answer": "Ann", "answer_aliases": ["Ann Lee"]}) == ["Ann", "Ann Lee"]
    assert reference_answers({"Answer": TRIVIAQA["Answer"]})[:3] == ["Mars", "Mars", "The Red Planet"]


@pytest.mark.parametrize(
    ("name", "data", "where", "says"),
    [
        ("empty.jsonl", [{"question": "q1", "golden_answers": ["a"]}, {"question": "q2", "golden_answers": []}],
         "line 2", "no answer: none of 'golden_answers'"),
        ("verl.jsonl", [{"question": "q", "reward_model": "4"}], "line 1", "no answer"),
        ("verl2.jsonl", [{"question": "q", "reward_model": {"ground_truth": ""}}], "line 1", "no answer"),
        ("squad.json", {"data": [{"paragraphs": [{"qas": [{"id": "q1", "question": "Q?", "answers": [{"text": "a"}]},
                                                          {"id": "q2", "question": "Q?", "answers": []}]}]}]},
         "data[0].paragraphs[0].qas[1]", "no answer"),
        ("squad.json", {"data": [{"title": "no paragraphs"}]}, "data[0]", "no 'paragraphs' list"),
        ("other.json", {"questions": []}, "", "list of records or SQuAD"),
    ],
)  # fmt: skip
def test_a_row_that_cannot_be_scored_names_its_file_place_and_what_is_missing(
    tmp_path: Path, name: str, data: Any, where: str, says: str
) -> None:
    path = write(tmp_path / name, data, lines=name.endswith(".jsonl"))
    with pytest.raises(ValueError) as error:
        load_rows(path)
    assert str(error.value).startswith(f"{path}: {where}") and says in str(error.value), error.value


def test_json_lines_saved_as_json_are_read_line_by_line(tmp_path: Path) -> None:
    """Hugging Face ``datasets``' ``to_json("dev.json")`` writes JSON Lines: read as such, a bad line named."""
    path = write(
        tmp_path / "dev.json", [{"question": "q1", "answer": "a"}, {"question": "q2", "answer": ["b"]}]
    )
    assert [row["golden_answers"] for row in load_rows(path)] == [["a"], ["b"]]
    path.write_text(path.read_text() + '{"question": "q3", "answer": []}\n')
    with pytest.raises(ValueError, match=rf"^{path}: line 3: no answer"):
        load_rows(path)


def test_a_gz_file_that_is_not_gzip_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nq.jsonl.gz"
    path.write_text('{"question": "q", "answer": "a"}\n')  # named .gz, never compressed
    with pytest.raises(ValueError, match=rf"^{path}: not a complete gzip file"):
        load_rows(path)


def test_a_compressed_extra_file_is_its_own_split_named_without_its_suffixes(tmp_path: Path, capsys) -> None:
    ours = write(tmp_path / "test.jsonl", [{"messages": user("q"), "solution": "a", "hops": 1}])
    theirs = write(tmp_path / "nq_dev.jsonl.gz", [{"question": "q2", "answer": ["b"], "split": "test"}])
    trivia = write(tmp_path / "trivia.jsonl", [TRIVIAQA])
    rows = eval_sets.tagged_rows([str(ours), str(theirs), str(trivia)])
    assert [r["split"] for r in rows] == ["test", "nq_dev", "trivia"]  # their own "split" is not our test
    assert "hops" not in rows[1]  # no hops column: grouped as "None", not given one
    assert f"{theirs}: its rows' own split (test) is replaced by 'nq_dev'" in capsys.readouterr().err


def test_rows_repeating_an_id_or_a_question_are_kept_and_named_in_a_warning(tmp_path: Path, caplog) -> None:
    rows = [
        {"id": "a", "question": "q1", "golden_answers": ["x"]},
        {"id": "a", "question": "q2", "golden_answers": ["y"]},  # the same id: a copy edited, or a clash
        {"id": "b", "question": "q3", "golden_answers": ["z"]},
        {"id": "c", "question": "q3", "golden_answers": ["z"]},  # the same question under another id
        {"question": "q4", "golden_answers": ["w"], "split": "dev"},
        {"question": "q4", "golden_answers": ["w"], "split": "test"},  # another split: not a repeat
    ]
    path = write(tmp_path / "dups.jsonl", rows)
    with caplog.at_level("WARNING", logger="swift_rlfactory.eval.runner"):
        assert len(load_rows(path)) == 6  # nothing dropped
    [warning] = [r.getMessage() for r in caplog.records]
    assert f"{path}: 2 rows repeat" in warning
    assert "line 2 repeats the id of line 1 ('a')" in warning
    assert "line 4 repeats the question of line 3 ('q3?')" in warning
