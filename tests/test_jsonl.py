"""Every JSONL reader keeps a record whole when its text holds a character ``str.splitlines`` breaks at.

``json.dumps(..., ensure_ascii=False)`` (our eval log, ``write_jsonl``, most dataset tools) writes U+2028,
U+2029 and U+0085 unescaped; a model can write them into an answer, and a dataset
scraped from the web holds them. JSON Lines ends a line at ``\\n`` only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from swift_rlfactory.data import jsonl
from swift_rlfactory.data.qa import load_qa
from swift_rlfactory.eval.runner import load_rows
from swift_rlfactory.rewards.rescore import load_recorded
from swift_rlfactory.runs.eval_log import EvalLog

from .conftest import ROOT

RECORDED = ROOT / "tests" / "fixtures" / "deepsearch_cpu_eval" / "trajectories.jsonl"
SEPARATORS = ["\u2028", "\u2029", "\u0085"]  # json.dumps escapes the ASCII ones (\f, \x1c, ...)


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(s):04X}" for s in SEPARATORS])
def test_a_dataset_row_with_a_separator_in_its_text_loads_whole(tmp_path: Path, sep: str):
    rows = [
        {"question": f"who wrote{sep}hamlet", "golden_answers": ["Shakespeare"]},
        {"question": "q2", "golden_answers": ["a"]},
    ]
    path = write(tmp_path / "data.jsonl", rows)
    assert [r["messages"][0]["content"] for r in load_rows(path)] == [f"who wrote{sep}hamlet?", "q2?"]
    assert [r["golden_answers"] for r in load_qa(path)] == [["Shakespeare"], ["a"]]


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(s):04X}" for s in SEPARATORS])
def test_an_eval_log_line_with_a_separator_in_an_answer_resumes(tmp_path: Path, sep: str):
    log = EvalLog(tmp_path / "trajectories.jsonl")
    for sample in range(2):
        log.append({"index": 0, "sample": sample, "messages": [{"role": "assistant", "content": f"a{sep}b"}]})
    assert sep in log.path.read_text(encoding="utf-8")  # written as it is, not escaped
    done = log.load()
    assert list(done) == [(0, 0), (0, 1)] and done[(0, 1)]["messages"][0]["content"] == f"a{sep}b"


def test_recorded_trajectories_with_a_separator_are_rescored(tmp_path: Path):
    records = [json.loads(line) for line in RECORDED.read_text().splitlines()[:2]]
    records[0]["messages"][-1]["content"] += "\u2028<answer>x</answer>"
    path = write(tmp_path / "trajectories.jsonl", records)
    assert [r.line for r in load_recorded(path)] == [1, 2]


def test_lines_splits_at_newlines_only():
    assert jsonl.lines("a\u2028b\r\nc\n") == ["a\u2028b\r", "c"]
    assert jsonl.lines("") == [] and jsonl.lines("\n") == [""] and jsonl.lines("a") == ["a"]


# -- encodings and line ends: a dataset is read as its editor saved it, or refused naming file and line ----
ROWS = [
    {"question": "who wrote hamlet", "golden_answers": ["Shakespeare"]},
    {"question": "q2", "answer": "a"},
]
BOM = b"\xef\xbb\xbf"


def lines_of(rows: list[dict], end: bytes = b"\n") -> list[bytes]:
    return [json.dumps(r, ensure_ascii=False).encode() + end for r in rows]


@pytest.mark.parametrize(
    "data",
    [
        BOM + b"".join(lines_of(ROWS)),  # Notepad's "UTF-8 with BOM", PowerShell's Out-File
        BOM + b"".join(lines_of(ROWS, b"\r\n")),  # ... with Windows line ends
        b"\r\n".join(lines_of(ROWS, b"")),  # CRLF, the last line without its line end
        b"\n\n" + b"\r\n\r\n".join(lines_of(ROWS, b"")) + b"\n\n",  # blank lines around and between
        BOM + lines_of(ROWS)[0] + BOM + lines_of(ROWS)[1],  # `cat a.jsonl b.jsonl` of two BOM files
    ],
    ids=["bom", "bom-crlf", "crlf-no-final-newline", "blank-lines", "cat-of-bom-files"],
)
def test_a_utf8_dataset_loads_with_a_bom_crlf_and_blank_lines(tmp_path: Path, data: bytes):
    path = tmp_path / "data.jsonl"
    path.write_bytes(data)
    assert [r["messages"][0]["content"] for r in load_rows(path)] == ["who wrote hamlet?", "q2?"]
    assert [r["golden_answers"] for r in load_qa(path)] == [["Shakespeare"], ["a"]]


def test_a_json_dataset_with_a_bom_loads(tmp_path: Path):
    path = tmp_path / "data.json"
    path.write_bytes(BOM + json.dumps(ROWS).encode())
    assert (
        [r["solution"] for r in load_rows(path)]
        == ["Shakespeare", "a"]
        == [r["solution"] for r in load_qa(path)]
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (lines_of(ROWS)[0] + '{"question": "café", "answer": "x"}\n'.encode("latin-1"),
         r"data\.jsonl: line 2, column 18: byte 0xe9 is not UTF-8 .*save the file as UTF-8"),
        ("".join(json.dumps(r) + "\n" for r in ROWS).encode("utf-16"),  # Python's utf-16 writes the BOM
         r"data\.jsonl: the file is UTF-16 text \(by its byte order mark\); save it as UTF-8"),
        ("".join(json.dumps(r) + "\n" for r in ROWS).encode("utf-16-le"),
         r"data\.jsonl: line 1, column 2: a NUL byte.*UTF-16 file without a byte order mark"),
    ],
    ids=["latin-1", "utf-16-bom", "utf-16-no-bom"],
)  # fmt: skip
def test_a_dataset_in_another_encoding_is_refused_naming_file_and_line(tmp_path: Path, data, message):
    path = tmp_path / "data.jsonl"
    path.write_bytes(data)
    for load in (load_rows, load_qa):
        with pytest.raises(ValueError, match=message):
            load(path)


def test_a_bad_json_line_is_named_by_file_and_line_in_every_loader(tmp_path: Path, caplog):
    """The converter refuses it; an eval skips it, naming it, and fails only when no line is left."""
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\r\n\r\n" + '{"question": "q2", answer}\r\n')
    with pytest.raises(ValueError, match=r"data\.jsonl: line 3: not valid JSON"):
        load_qa(path)
    assert len(load_rows(path)) == 1
    assert re.search(r"data\.jsonl: skipped 1 of 2 rows.*line 3: not valid JSON", caplog.text)
    path.write_text('{"question": "q2", answer}\r\n')
    with pytest.raises(ValueError, match=r"data\.jsonl: no row can be scored: line 1: not valid JSON"):
        load_rows(path)


@pytest.mark.parametrize(
    ("question", "asked"),
    [
        ("who got the first nobel prize in physics", "who got the first nobel prize in physics?"),
        ("Capital of France?", "Capital of France?"),
        ("法国的首都是哪里？", "法国的首都是哪里？"),  # full-width question mark
        ("ما هي عاصمة فرنسا؟", "ما هي عاصمة فرنسا؟"),  # Arabic question mark
        ("フランスの首都は「どこ？」", "フランスの首都は「どこ？」"),  # before a closing bracket
        ('Who said "why?"', 'Who said "why?"'),  # before a closing quote
        ("what ⁇", "what ⁇"),
        ("  padded question?  ", "padded question?"),
        (
            "If there were 188 beetles, calculate the total.",
            "If there were 188 beetles, calculate the total.",
        ),
        ("计算总数。", "计算总数。"),  # ideographic full stop
        ("Name the planet!", "Name the planet!"),
        ("when did the u.s", "when did the u.s?"),  # a full stop inside is no end
    ],
)
def test_a_question_gets_a_question_mark_only_when_it_has_none(tmp_path: Path, question: str, asked: str):
    path = write(tmp_path / "data.jsonl", [{"question": question, "golden_answers": ["x"]}])
    assert load_rows(path)[0]["messages"][0]["content"] == asked


def test_an_eval_log_that_is_not_utf8_is_named_by_file_and_line(tmp_path: Path):
    log = EvalLog(tmp_path / "trajectories.jsonl")
    log.append({"index": 0, "sample": 0, "messages": []})
    with open(log.path, "ab") as f:
        f.write(
            b'{"index": 0, "sample": 1, "messages": [{"content": "caf\xe9"}]}\n'
        )  # another tool appended it
    with pytest.raises(ValueError, match=r"trajectories\.jsonl: line 2, column 56: byte 0xe9 is not UTF-8"):
        log.load()
