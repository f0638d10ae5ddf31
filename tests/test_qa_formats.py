"""Evaluation files written outside this repository, in the common public QA formats.

An independent suite scores trained models on held-back question files in whatever shape they come in:
each format's question and every accepted answer (aliases included) must be read, and a row that cannot
be scored is skipped, said once with the file, where in it and what is missing, never scored 0 unsaid and
never the end of the whole eval; a file of no such row fails naming the file and why.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import sys
from pathlib import Path
from typing import Any

import pytest

from swift_rlfactory.data.answers import reference_answers
from swift_rlfactory.data.qa import convert_qa_record, load_qa
from swift_rlfactory.eval.runner import load_dataset, load_rows
from swift_rlfactory.rewards import rules

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
        ("msmarco.jsonl", [{"_id": "q1", "query": "what is a corgi", "answers": ["a dog"]}], "what is a corgi?", ["a dog"]),
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


GOOD = {"question": "q0", "golden_answers": ["a"]}


@pytest.mark.parametrize(
    ("name", "bad", "where", "says"),
    [
        ("empty.jsonl", [{"question": "q2", "golden_answers": []}], "line 2", "no answer: none of 'golden_answers'"),
        ("empty_json.jsonl", [{"question": "q2", "golden_answers": "[]"}], "line 2", "no answer: none of 'golden_answers'"),
        ("verl.jsonl", [{"question": "q", "reward_model": "4"}], "line 2", "no answer"),
        ("verl2.jsonl", [{"question": "q", "reward_model": {"ground_truth": ""}}], "line 2", "no answer"),
        ("noq.jsonl", [{"golden_answers": ["a"]}], "line 2", "no question"),
        ("flag.jsonl", [{"question": True, "answer": "a"}], "line 2", "no question"),
        ("list.json", [{"question": "q2", "answer": {"odd": 1}}], "record 2", "column 'answer': an answer is"),
        ("squad.json", [{"id": "q2", "question": "Q?", "answers": []}], "data[0].paragraphs[0].qas[1]", "no answer"),
    ],
)  # fmt: skip
def test_a_row_that_cannot_be_scored_is_skipped_and_named_once_and_a_file_of_none_fails(
    tmp_path: Path, caplog, name: str, bad: list[Any], where: str, says: str
) -> None:
    """One odd row of thousands never stops an eval: it is left out of every score, and one warning names
    the file, where the row is and why; a file no row of which can be scored fails, naming both."""

    def data(records: list[Any]) -> Any:
        return {"data": [{"paragraphs": [{"qas": records}]}]} if name.startswith("squad") else records

    path = write(tmp_path / name, data([GOOD, *bad]), lines=name.endswith(".jsonl"))
    with caplog.at_level("WARNING", logger="swift_rlfactory.eval.runner"):
        [row] = load_rows(path)
    assert row["golden_answers"] == ["a"]
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"{path}: skipped 1 of 2 rows") and f"{where}: {says}" in warning, warning
    write(path, data(bad), lines=name.endswith(".jsonl"))
    with pytest.raises(ValueError) as error:
        load_rows(path)
    assert str(error.value).startswith(f"{path}: no row can be scored: ") and says in str(error.value)


@pytest.mark.parametrize(
    ("name", "data", "where", "says"),
    [
        ("squad.json", {"data": [{"title": "no paragraphs"}]}, "data[0]", "no 'paragraphs' list"),
        ("other.json", {"questions": []}, "", "list of records or SQuAD"),
        ("blank.jsonl", [], "", "no row can be scored: the file holds no records"),
    ],
)  # fmt: skip
def test_a_file_not_in_a_known_shape_names_itself_and_what_is_wrong(
    tmp_path: Path, name: str, data: Any, where: str, says: str
) -> None:
    path = write(tmp_path / name, data, lines=name.endswith(".jsonl"))
    with pytest.raises(ValueError) as error:
        load_rows(path)
    assert str(error.value).startswith(f"{path}: {where}") and says in str(error.value), error.value


def test_a_line_that_is_not_json_is_skipped_naming_its_line(tmp_path: Path, caplog) -> None:
    path = tmp_path / "dev.jsonl"
    path.write_text(
        '{"question": "q1", "answer": "a"}\n{"question": "q2", "ans\n{"question": "q3", "answer": "c"}\n'
    )
    with caplog.at_level("WARNING", logger="swift_rlfactory.eval.runner"):
        assert [r["golden_answers"] for r in load_rows(path)] == [["a"], ["c"]]
    assert "line 2: not valid JSON" in caplog.text


def test_squad_v2_unanswerable_questions_are_left_out_and_said_once(tmp_path: Path, caplog) -> None:
    """SQuAD v2's ``is_impossible`` questions have no answer to match (their ``plausible_answers`` are the
    wrong ones, on purpose): left out, counted in one warning, never the end of the load."""
    impossible = {"question": "Unanswerable?", "answers": [], "is_impossible": True,
                  "plausible_answers": [{"text": "wrong", "answer_start": 0}]}  # fmt: skip
    qas = [{"id": "q1", "question": "What is X?", "answers": [{"text": "Y", "answer_start": 0}],
            "is_impossible": False}, {**impossible, "id": "q2"}, {**impossible, "id": "q3"}]  # fmt: skip
    path = write(
        tmp_path / "dev-v2.0.json", {"version": "v2.0", "data": [{"paragraphs": [{"qas": qas}]}]}, lines=False
    )
    with caplog.at_level("WARNING", logger="swift_rlfactory.eval.runner"):
        [row] = load_rows(path)
    assert row["golden_answers"] == ["Y"] and row["id"] == "q1"
    [warning] = [r.getMessage() for r in caplog.records]
    assert "skipped 2 of 3 rows" in warning and warning.count("is_impossible") == 1, warning
    assert "2 rows: data[0].paragraphs[0].qas[1], data[0].paragraphs[0].qas[2]" in warning


def test_load_qa_names_the_unanswerable_questions_it_leaves_out_and_what_to_do(
    tmp_path: Path, caplog
) -> None:
    """Converting a SQuAD v2 file for training says which questions were left out (not only how many) and
    what keeps one: an answer to match, so a user who expected them knows where to look."""
    impossible = {"question": "Unanswerable?", "answers": [], "is_impossible": True}
    qas = [{"id": "q1", "question": "What is X?", "answers": [{"text": "Y", "answer_start": 0}]},
           {**impossible, "id": "q2"}, {**impossible, "id": "q3"}]  # fmt: skip
    path = write(tmp_path / "dev-v2.0.json", {"data": [{"paragraphs": [{"qas": qas}]}]}, lines=False)
    with caplog.at_level("WARNING", logger="swift_rlfactory.data.qa"):
        [row] = load_qa(path)
    assert row["golden_answers"] == ["Y"]
    [warning] = [r.getMessage() for r in caplog.records]
    assert str(path) in warning and "left out 2 " in warning
    assert "data[0].paragraphs[0].qas[1], data[0].paragraphs[0].qas[2]" in warning
    assert "'answers'" in warning and "'is_impossible': false" in warning


def test_a_boolean_answer_is_yes_or_no_as_a_model_would_say_it(tmp_path: Path) -> None:
    """BoolQ keeps ``"answer": true``: its str() "True" matched only a model that answered "true"."""
    path = write(tmp_path / "boolq.jsonl", [{"question": "is the sky blue", "answer": True},
                                            {"question": "is fire cold", "answer": False}])  # fmt: skip
    rows = load_rows(path)
    assert [r["golden_answers"] for r in rows] == [["yes", "true"], ["no", "false"]]
    assert rows[0]["solution"] == "yes"
    assert rules.exact_match("Yes.", rows[0]["golden_answers"]) == 1.0
    assert rules.exact_match("no", rows[0]["golden_answers"]) == 0.0
    assert reference_answers({"answer": True}) == ["yes", "true"]  # a messages row reads the same rule


def test_a_record_converted_and_kept_as_a_row_has_the_same_reference() -> None:
    """One list of answer columns, in one order, for the converter and the trajectory: a record holding
    both ``answer`` and ``solution`` was scored against ``answer`` when converted, ``solution`` as a row.
    ``answer`` wins: in MATH- and AIME-style sets ``solution`` is the worked one, which EM never meets."""
    record = {"question": "q", "answer": "204", "solution": "Let x be ... so the answer is $\\boxed{204}$."}
    converted = convert_qa_record(record)
    assert converted["golden_answers"] == reference_answers({"messages": user("q?"), **record}) == ["204"]


def test_a_question_is_kept_over_a_query_beside_it() -> None:
    """``query`` is the question of retrieval sets (BEIR, MS MARCO); a record holding both keeps its
    ``question``, as one holding ``Question`` beside it does, and neither is copied onto the row."""
    record = {"question": "who wrote hamlet", "query": "hamlet author", "answer": "Shakespeare"}
    row = convert_qa_record(record)
    assert row["messages"] == user("who wrote hamlet?") and "query" not in row


@pytest.mark.parametrize(
    ("record", "answers"),
    [
        ({"golden_answers": '["Paris", "paris, france"]'}, ["Paris", "paris, france"]),  # a CSV -> JSONL export
        ({"answers": ' ["Paris"] '}, ["Paris"]),
        ({"answer": '["Ann"]', "answer_aliases": '["Ann Lee"]'}, ["Ann", "Ann Lee"]),
        ({"answer": "[citation needed]"}, ["[citation needed]"]),  # no JSON: the answer's own text
        ({"answer": '["Paris", "Lyon"'}, ['["Paris", "Lyon"']),  # cut short: no JSON either
        ({"answer": "[-2, 7]"}, ["[-2, 7]"]),  # MATH's interval answer, not the answers -2 and 7
        ({"answer": '["x", 1]'}, ['["x", 1]']),
        ({"answers": {"text": ["Y", "Y."], "answer_start": [0, 0]}}, ["Y", "Y."]),  # SQuAD's, as before
    ],
)  # fmt: skip
def test_answers_saved_as_the_text_of_a_json_list_of_strings_are_that_list(
    record: dict[str, Any], answers: list[str]
) -> None:
    """A table exported to JSON Lines writes an answer list as its JSON text, and the one answer
    ``'["Paris", "paris, france"]'`` was matched by no model. Converted or kept as a row, the same answers."""
    converted = convert_qa_record({"question": "q", **record})
    assert converted["golden_answers"] == reference_answers({"messages": user("q?"), **record}) == answers


@pytest.mark.parametrize(
    ("name", "text", "answers"),
    [
        ("nq-test.qa.csv", "who wrote hamlet\t['William Shakespeare', \"Shakespeare\"]\nwhere is paris\t['France']\n",
         [["William Shakespeare", "Shakespeare"], ["France"]]),  # DPR: tabs in a .csv, no header
        ("dev.tsv", "question\tanswers\nwho wrote hamlet\t[\"Shakespeare\"]\nwhere is paris\tFrance\n",
         [["Shakespeare"], ["France"]]),
        ("dev.csv", 'id,question,answer\n1,who wrote hamlet,"[\'Shakespeare\', \'Bard\']"\n2,"where, is paris",France\n',
         [["Shakespeare", "Bard"], ["France"]]),
        ("nq.tsv.gz", "who wrote hamlet\t['Shakespeare']\nwhere is paris\t['France']\n", [["Shakespeare"], ["France"]]),
        ("queries.csv", "_id,query,answer\n1,who wrote hamlet,Shakespeare\n2,where is paris,France\n",
         [["Shakespeare"], ["France"]]),  # BEIR-style: the question is the query column
    ],
)  # fmt: skip
def test_dpr_and_other_csv_tsv_files_load_with_their_answer_lists(
    tmp_path: Path, name: str, text: str, answers: list[list[str]]
) -> None:
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    rows = load_rows(path)
    assert [r["golden_answers"] for r in rows] == answers
    assert rows[0]["messages"][-1]["content"] == "who wrote hamlet?"


def test_a_table_row_of_the_wrong_width_is_skipped_naming_its_line(tmp_path: Path, caplog) -> None:
    path = tmp_path / "dev.tsv"
    path.write_text("q1\t['a']\nq2\t['b']\textra\nq3\t['c']\n")
    with caplog.at_level("WARNING", logger="swift_rlfactory.eval.runner"):
        assert [r["golden_answers"] for r in load_rows(path)] == [["a"], ["c"]]
    assert "line 2: 3 cells, but the columns are ['question', 'answers']" in caplog.text


def test_rows_in_our_format_saved_as_parquet_load_as_plain_json(tmp_path: Path) -> None:
    """pandas hands a parquet cell back as a numpy array: ``messages`` was refused as no list, and an
    answer list would be logged as its str() ``"['a' 'b']"``."""
    pd = pytest.importorskip("pandas")
    path = tmp_path / "test.parquet"
    rows = [{"messages": user("q1"), "golden_answers": ["a", "b"], "solution": "a", "hops": 2}]
    pd.DataFrame(rows).to_parquet(path)
    [row] = load_rows(path)
    assert row == rows[0] and type(row["golden_answers"]) is list and type(row["hops"]) is int
    assert json.loads(json.dumps(row, default=str)) == rows[0]


def test_a_parquet_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    path = tmp_path / "test.parquet"
    path.write_text("not parquet")
    with pytest.raises(ValueError, match=rf"^{path}: not a readable parquet file"):
        load_rows(path)


def test_gzip_is_known_by_its_bytes_and_by_a_suffix_in_any_case(tmp_path: Path) -> None:
    data = gzip.compress(b'{"question": "q", "answer": "a"}\n')
    (tmp_path / "nq.jsonl").write_bytes(data)  # compressed, never renamed
    (tmp_path / "NQ.JSONL.GZ").write_bytes(data)
    for name in ("nq.jsonl", "NQ.JSONL.GZ"):
        assert [r["golden_answers"] for r in load_rows(tmp_path / name)] == [["a"]]
    assert eval_sets.named(str(tmp_path / "NQ.JSONL.GZ"))[0] == "NQ"


def test_json_lines_saved_as_json_are_read_line_by_line(tmp_path: Path, caplog) -> None:
    """Hugging Face ``datasets``' ``to_json("dev.json")`` writes JSON Lines: read as such, a bad line named."""
    path = write(
        tmp_path / "dev.json", [{"question": "q1", "answer": "a"}, {"question": "q2", "answer": ["b"]}]
    )
    assert [row["golden_answers"] for row in load_rows(path)] == [["a"], ["b"]]
    path.write_text(path.read_text() + '{"question": "q3", "answer": []}\n')
    assert len(load_rows(path)) == 2
    assert f"{path}: skipped 1 of 3 rows, which are not in any score: line 3: no answer" in caplog.text


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


# -- compression: gzip, bzip2 and xz are read (the standard library has them); zstd is refused, named ------
COMPRESSORS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}


@pytest.mark.parametrize("suffix", list(COMPRESSORS))
@pytest.mark.parametrize("renamed", [False, True], ids=["by-name", "by-bytes"])
def test_a_compressed_dataset_is_read_by_its_suffix_or_its_bytes(tmp_path: Path, suffix, renamed) -> None:
    """``nq.jsonl.bz2``, ``nq.json.XZ``, or one compressed and never renamed: each read as its format."""
    records = [{"question": "q1", "answer": "a"}, {"question": "q2", "answer": ["b"]}]
    text = "".join(json.dumps(r) + "\n" for r in records)
    for name, data in ((f"nq.jsonl{suffix.upper()}", text), (f"dev.json{suffix}", json.dumps(records))):
        path = tmp_path / (name.rsplit(".", 1)[0] if renamed else name)
        path.write_bytes(COMPRESSORS[suffix](data.encode()))
        assert [r["golden_answers"] for r in load_rows(path)] == [["a"], ["b"]], path
    if not renamed:
        assert eval_sets.named(str(tmp_path / f"nq_dev.jsonl{suffix}"))[0] == "nq_dev"


@pytest.mark.parametrize("suffix", [".bz2", ".xz"])
def test_a_compressed_file_cut_short_is_named(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"nq.jsonl{suffix}"
    path.write_bytes(COMPRESSORS[suffix](b'{"question": "q", "answer": "a"}\n' * 50)[:-8])
    with pytest.raises(ValueError, match=rf"^{path}: not a complete {suffix[1:]} file"):
        load_rows(path)


@pytest.mark.parametrize("name", ["nq.jsonl.zst", "NQ.JSONL.ZSTD", "nq.jsonl"])
def test_a_zstd_dataset_is_refused_naming_the_file_and_how_to_decompress_it(tmp_path: Path, name) -> None:
    """No zstd decoder in the standard library, and not worth a dependency: say so before a model loads."""
    path = tmp_path / name
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 16)  # zstd's magic number (the bytes of nq.jsonl too)
    with pytest.raises(ValueError, match=rf"^{path}: zstd-compressed.*zstd -d"):
        load_rows(path)


@pytest.mark.parametrize(
    ("name", "text", "positions"),
    [
        ("dev.csv", "question,answer\nq0,a\nq1,a,extra\n\nq2,a\n", [0, 2]),  # a row of 3 cells; a blank one
        ("dev.json", json.dumps([{"question": "q0", "answer": "a"}, {"answer": "a"}, {"question": "q2", "answer": "a"}]), [0, 2]),
        ("dev.jsonl", '{"question": "q0", "answer": "a"}\n\n{"question": \n{"question": "q2", "answer": "a"}\n', [0, 2]),
        ("squad.json", json.dumps({"data": [{"paragraphs": [{"qas": [
            {"question": "q0", "answers": [{"text": "a"}]},
            {"question": "q1", "answers": [], "is_impossible": True},
            {"question": "q2", "answers": [{"text": "a"}]}]}]}]}), [0, 2]),
    ],
)  # fmt: skip
def test_a_rows_position_counts_the_skipped_rows_before_it_in_every_format(
    tmp_path: Path, name, text, positions
):
    """What an eval keys its episodes by (``index``): a row's place among the file's records, so a skipped
    row fixed later moves no other row."""
    path = tmp_path / name
    path.write_text(text)
    rows = load_dataset(path)
    assert list(rows) == positions
    assert [row["messages"][0]["content"] for row in rows.values()] == [
        "q0?",
        "q2?",
    ]


def test_a_json_list_saved_under_a_json_lines_name_is_read_as_a_list(tmp_path: Path) -> None:
    """``json.dump(rows, open("dev.jsonl", "w"), indent=2)`` writes one JSON list over many lines, none of
    them JSON by itself: its records are read (named by number), not every line skipped as torn."""
    records = [{"question": "q1", "answer": "a"}, {"question": "q2", "answer": ["b"]}]
    for name in ("dev.jsonl", "one_line.jsonl"):
        path = tmp_path / name
        path.write_text(json.dumps(records, indent=2 if name == "dev.jsonl" else None))
        assert [row["golden_answers"] for row in load_rows(path)] == [["a"], ["b"]]
    path = write(tmp_path / "lines.jsonl", [[1, 2], {"question": "q", "answer": "c"}])  # JSON Lines after all
    skipped: list[Any] = []
    assert [row["golden_answers"] for row in load_rows(path, skipped=skipped)] == [["c"]]
    assert [s.where for s in skipped] == ["line 1"]


def test_triviaqa_as_released_is_read_from_its_data_list(tmp_path: Path, caplog) -> None:
    """TriviaQA's own ``qa/*.json`` wrap its questions in ``{"Data": [...], "Domain": ..., "Version": ...}``;
    each is a record, named by its place, and one without an ``Answer`` (the test files') is skipped."""
    path = write(
        tmp_path / "wikipedia-dev.json",
        {
            "Data": [TRIVIAQA, {"Question": "Hidden?", "QuestionId": "tc_2"}],
            "Domain": "Wikipedia",
            "Version": 1.0,
        },
        lines=False,
    )
    [row] = load_rows(path)
    assert row["golden_answers"][:3] == ["Mars", "Mars", "The Red Planet"] and row["QuestionId"] == "tc_1"
    assert f"{path}: skipped 1 of 2 rows, which are not in any score: Data[1]: no answer" in caplog.text


def test_a_json_list_in_a_json_lines_file_cut_short_is_named_as_one(tmp_path: Path) -> None:
    """A pretty-printed list whose download stopped halfway fails as that, naming where its JSON ends,
    not as a dozen lines that are each no JSON."""
    path = tmp_path / "dev.jsonl"
    path.write_text(
        json.dumps([{"question": "q1", "answer": "a"}, {"question": "q2", "answer": "b"}], indent=2)[:-9]
    )
    with pytest.raises(
        ValueError, match=rf"^{path}: a JSON list \(its first line is '\['\), but not valid JSON"
    ):
        load_rows(path)
