"""The JSON Lines tail both run readers use: what a growing, replaced, torn or removed log reads as."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from swift_rlfactory.ui.tail import JsonlTail


def read(tail: JsonlTail) -> tuple[bool, list[tuple[int, int, dict]]]:
    restarted, records = tail.read()
    return restarted, [(r.offset, r.line, r.value) for r in records]


def test_a_line_being_written_is_read_once_whole(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n{"b": ')
    tail = JsonlTail(path)
    assert read(tail) == (False, [(0, 1, {"a": 1})])
    assert read(tail) == (False, [])  # still torn: not parsed, not counted as skipped
    with open(path, "a") as f:
        f.write('2}\n{"c": 3}\n')
    assert read(tail) == (False, [(9, 2, {"b": 2}), (18, 3, {"c": 3})])
    assert tail.skipped == 0 and tail.end == path.stat().st_size


def test_a_file_that_shrank_is_read_again_from_its_start(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"run": 1}\nnot json\n{"run": 1}\n')
    tail = JsonlTail(path)
    assert len(read(tail)[1]) == 2 and tail.skipped == 1
    path.write_text('{"run": 2}\n')  # a new run in the same folder
    assert read(tail) == (True, [(0, 1, {"run": 2})]) and tail.skipped == 0


def test_another_file_at_the_path_is_read_from_its_start_even_when_it_is_longer(tmp_path: Path):
    """A log deleted and written again (or saved by an editor through a temporary file) can be longer than
    what was read by the next refresh: it is another file, not more lines of the old one."""
    path = tmp_path / "log.jsonl"
    path.write_text('{"run": 1}\n')
    tail = JsonlTail(path)
    read(tail)
    new = tmp_path / "new.jsonl"
    new.write_text('{"run": 2, "pad": "xxxxxxxxxx"}\n{"run": 2}\n')
    os.replace(new, path)
    restarted, records = read(tail)
    assert restarted and [v for _, _, v in records] == [{"run": 2, "pad": "xxxxxxxxxx"}, {"run": 2}]
    assert tail.skipped == 0


def test_a_file_emptied_and_written_again_past_the_old_end_is_read_from_its_start(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"run": 1}\n')
    tail = JsonlTail(path)
    read(tail)
    with open(path, "w") as f:  # the same file (same inode), truncated and written by a new run
        f.write('{"run": 2, "longer": true}\n')
    restarted, records = read(tail)
    assert restarted and [v for _, _, v in records] == [{"run": 2, "longer": True}]
    assert tail.skipped == 0


def test_a_line_that_is_not_a_json_object_is_left_out_with_a_warning_that_does_not_quote_it(
    tmp_path: Path, caplog
):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\n{"key": "sk-SECRET", "torn\n[1, 2]\n\xff\xfe\n{"b": 2}\n')
    tail = JsonlTail(path)
    with caplog.at_level(logging.WARNING, logger="swift_rlfactory.ui.tail"):
        _, records = read(tail)
    assert [(line, value) for _, line, value in records] == [(1, {"a": 1}), (5, {"b": 2})]
    assert tail.skipped == 3
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [f"{path}: line {n} is not a JSON object; left out" for n in (2, 3, 4)]
    assert "SECRET" not in caplog.text


def test_windows_line_ends_byte_order_marks_and_blank_lines_are_read(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    bom = b"\xef\xbb\xbf"  # also opening a later line, where `cat` joined files that each had one
    path.write_bytes(bom + b'{"a": 1}\r\n\r\n   \n{"b": "x\\r\\n"}\r\n' + bom + b'{"c": 3}\n')
    tail = JsonlTail(path)
    records = [(line, value) for _, line, value in read(tail)[1]]
    assert records == [(1, {"a": 1}), (4, {"b": "x\r\n"}), (5, {"c": 3})]
    assert tail.skipped == 0


def test_an_empty_missing_or_removed_file_has_no_new_lines_and_keeps_what_was_read(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    tail = JsonlTail(path)
    assert read(tail) == (False, [])  # not written yet
    path.write_text("")
    assert read(tail) == (False, [])
    path.write_text(json.dumps({"a": 1}) + "\n")
    assert read(tail) == (False, [(0, 1, {"a": 1})])
    _, records = tail.read()  # opened, then removed before it is read: the open file is still read
    path.unlink()
    assert list(records) == [] and read(tail) == (False, []) and tail.end == 9
    path.write_text('{"b": 2}\n')  # written again: another file
    assert read(tail) == (True, [(0, 1, {"b": 2})])
