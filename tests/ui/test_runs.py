"""A run folder's metric log as the Live metrics tab reads it: growing, replaced, torn and odd files."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from swift_rlfactory.ui.runs import MetricLog


def step_line(step: int, reward: float, max_steps: int = 10) -> str:
    """A line as ms-swift's ``logging.jsonl`` holds one training step."""
    record = {
        "loss": 0.1,
        "reward": reward,
        "global_step/max_steps": f"{step}/{max_steps}",
        "elapsed_time": f"{step}s",
    }
    return json.dumps(record) + "\n"


def points(log: MetricLog) -> list[tuple[int, float]]:
    return [(p["step"], p["value"]) for p in log.series(("reward",))]


def test_windows_line_ends_and_an_empty_log_read(tmp_path: Path):
    path = tmp_path / "logging.jsonl"
    path.write_text("")
    log = MetricLog(path)
    assert log.refresh() == 0 and log.rows == []
    path.write_bytes((step_line(1, 0.5) + "\n" + step_line(2, 0.25)).replace("\n", "\r\n").encode())
    assert log.refresh() == 2 and points(log) == [(1, 0.5), (2, 0.25)] and log.skipped == 0


def test_a_log_replaced_by_a_longer_one_is_read_from_its_start(tmp_path: Path):
    """A new run whose log is written before the next refresh is longer than what was read: it is read
    from its start, not from the old log's end (mid-line: torn lines, and the new run's first steps lost)."""
    path = tmp_path / "logging.jsonl"
    path.write_text(step_line(1, 0.1))
    log = MetricLog(path)
    log.refresh()
    new = tmp_path / "new.jsonl"
    new.write_text("".join(step_line(s, 0.5) for s in (1, 2, 3)))
    os.replace(new, path)
    log.refresh()
    assert points(log) == [(1, 0.5), (2, 0.5), (3, 0.5)] and log.skipped == 0


def test_a_torn_line_in_the_middle_is_left_out_with_a_warning(tmp_path: Path, caplog):
    path = tmp_path / "logging.jsonl"
    path.write_text(step_line(1, 0.1) + step_line(2, 0.2)[:30] + "\n" + step_line(3, 0.3))
    log = MetricLog(path)
    with caplog.at_level(logging.WARNING):
        log.refresh()
    assert [step for step, _ in points(log)] == [1, 3] and log.skipped == 1
    assert f"{path}: line 2 is not a JSON object; left out" in caplog.text


def test_refreshes_of_one_run_at_once_read_each_step_once(tmp_path: Path):
    """Gradio runs the metrics timer and the table's handler in threads, both refreshing one run."""
    path = tmp_path / "logging.jsonl"
    path.write_text("".join(step_line(s, 0.5, max_steps=20_000) for s in range(1, 20_001)))
    log = MetricLog(path)
    threads = [threading.Thread(target=log.refresh) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [row["_step"] for row in log.rows] == list(range(1, 20_001)) and log.skipped == 0
