"""The trajectory index reads a training log's steps and stop reasons from the lines' bytes: the first page
of a large log is answered without parsing every line, and answers as a full parse would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swift_rlfactory.runs.log import TrajectoryLog
from swift_rlfactory.trajectory import Trajectory
from swift_rlfactory.ui.index import Filters, TrajectoryIndex, summarize
from swift_rlfactory.ui.runs import Run

STEPS, PROMPTS = 1000, 50  # 50 000 groups: one prompt each


def trajectory(step: int, prompt: int) -> Trajectory:
    question = f"question {step}-{prompt}"
    return Trajectory(
        messages=[
            {"role": "user", "content": question},
            {"role": "assistant", "content": "<answer>4</answer>"},
        ],
        tool_calls=[{"tool": "add", "arguments": {"a": 1}, "error": "boom" if prompt == 3 else None}],
        turns=1,
        stop_reason="max_turns" if prompt % 7 == 0 else "answer",
        rewards={"total": prompt / PROMPTS},
    )


@pytest.fixture
def big_run(tmp_path: Path) -> Path:
    log = TrajectoryLog(tmp_path / "run" / "trajectories.jsonl")
    for step in range(1, STEPS + 1):
        log.write([trajectory(step, p) for p in range(PROMPTS)], step)
    for step in range(STEPS - 9, STEPS + 1):  # a resumed run logs the last ten steps again
        log.write([trajectory(step, p) for p in range(PROMPTS)], step)
    return tmp_path / "run"


def first_page(index: TrajectoryIndex) -> tuple:
    """What the page asks the index for when a run is opened."""
    rows = [
        (e.number, e.step, e.group, e.reward, e.stop_reason, e.tool_errors) for e in index.select(Filters())
    ]
    return rows, index.steps(), index.group_choices(None, None), index.stop_reasons(), index.count()


def test_the_first_page_of_a_large_log_parses_a_page_of_lines_not_the_log(big_run: Path, monkeypatch):
    parsed = 0
    loads = json.loads

    def counting(*args, **kwargs):
        nonlocal parsed
        parsed += 1
        return loads(*args, **kwargs)

    monkeypatch.setattr(json, "loads", counting)
    run = Run(big_run)
    rows, steps, groups, stops, count = first_page(run.trajectories)
    monkeypatch.setattr(json, "loads", loads)
    lines = (STEPS + 10) * PROMPTS
    assert len(run.trajectories.entries) == lines
    assert parsed < 500 < lines // 100  # the page's 200 rows and the last step's 50 groups, no more

    # the same answers as a full parse of every line, resumed steps included
    records = [json.loads(text) for text in (big_run / "trajectories.jsonl").read_text().splitlines()]
    assert count == STEPS * PROMPTS and steps == list(range(1, STEPS + 1))
    assert stops == ["answer", "max_turns"]
    assert groups == [summarize(n, 0, r).group for n, r in enumerate(records[-PROMPTS:])]
    expected = [summarize(n, 0, r) for n, r in enumerate(records[:200])]
    assert rows == [(e.number, e.step, e.group, e.reward, e.stop_reason, e.tool_errors) for e in expected]
    assert run.trajectories.entries[lines - 1].prompt == f"question {STEPS}-{PROMPTS - 1}"
    assert run.trajectories.read(0)["step"] == 1


@pytest.mark.parametrize(
    "extra, stop",
    [
        ({"row": {"stop_reason": "nested"}}, "answer"),  # a second "stop_reason" key: parsed whole
        ({"stop_reason": 'said "stop"'}, 'said "stop"'),  # an escaped stop reason: parsed whole
        ({"failed": True, "index": 2, "sample": 0}, "failed"),  # eval keys: parsed whole
    ],
)
def test_a_line_the_scan_cannot_be_sure_of_is_parsed_whole(tmp_path: Path, extra: dict, stop: str):
    record = {"step": 1, "time": 0.0, "messages": [], "stop_reason": "answer", **extra}
    path = tmp_path / "trajectories.jsonl"
    path.write_text(json.dumps(record) + "\n")
    index = TrajectoryIndex(path)
    assert index.refresh() == 1
    assert index.stop_reasons() == [stop] and index.entries[0].stop_reason == stop


def test_a_torn_line_a_resumed_writer_appended_to_is_skipped(tmp_path: Path):
    log = TrajectoryLog(tmp_path / "trajectories.jsonl")
    log.write([trajectory(1, 0)], 1)
    torn = log.path.read_bytes()[:60]  # the crash tore the line before its stop reason
    log.path.write_bytes(torn)
    log.write([trajectory(1, 1)], 1)  # the resumed writer appends its line to the torn one
    log.write([trajectory(2, 0)], 2)
    index = TrajectoryIndex(log.path)
    assert index.refresh() == 1 and index.skipped == 1 and index.steps() == [2]
