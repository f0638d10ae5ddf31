"""Every JSONL reader keeps a record whole when its text holds a character ``str.splitlines`` breaks at.

``json.dumps(..., ensure_ascii=False)`` (our eval log, ``write_jsonl``, most dataset tools) writes U+2028,
U+2029 and U+0085 unescaped; a model can write them into an answer, and a dataset
scraped from the web holds them. JSON Lines ends a line at ``\\n`` only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swift_rlfactory import jsonl
from swift_rlfactory.eval.runner import EvalLog, load_rows
from swift_rlfactory.retrieval.qa_data import load_qa
from swift_rlfactory.rewards.rescore import load_recorded

from .conftest import ROOT

RECORDED = ROOT / "benchmarks" / "deepsearch" / "results" / "cpu-diagnosis" / "trajectories.jsonl"
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
