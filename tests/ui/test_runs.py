"""A run folder's metric log as the Live metrics tab reads it: resumed runs, odd steps, odd files."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from swift_rlfactory.ui.index import Filters
from swift_rlfactory.ui.runs import MetricLog, Run


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


def test_steps_a_resumed_run_logs_again_replace_the_stopped_runs_and_those_after_them(tmp_path: Path):
    """A run stopped after step 5, resumed from its step-2 checkpoint into the same folder: it logs 3, 4
    again. The chart draws steps 1-4 once each, the resumed run's values for 3 and 4, and not the stopped
    run's step 5 (the model that goes on training never had it), where it drew 3, 4, 5, 3, 4."""
    path = tmp_path / "logging.jsonl"
    path.write_text("".join(step_line(s, 0.1 * s) for s in range(1, 6)))
    log = MetricLog(path)
    assert log.refresh() == 5 and log.replaced == 0
    with open(path, "a") as f:
        f.write(step_line(3, 0.9) + step_line(4, 0.8))
    assert log.refresh() == 2
    assert points(log) == [(1, 0.1), (2, 0.2), (3, 0.9), (4, 0.8)]
    assert log.replaced == 3
    with open(path, "a") as f:
        f.write(step_line(5, 0.7) + step_line(6, 0.6))
    log.refresh()
    assert [step for step, _ in points(log)] == [1, 2, 3, 4, 5, 6] and points(log)[4] == (5, 0.7)


def test_a_resumed_run_read_in_one_pass_and_a_new_run_in_the_same_folder(tmp_path: Path):
    path = tmp_path / "logging.jsonl"
    path.write_text("".join(step_line(s, r) for s, r in ((1, 0.1), (2, 0.2), (3, 0.3), (2, 0.8), (3, 0.9))))
    log = MetricLog(path)
    log.refresh()
    assert points(log) == [(1, 0.1), (2, 0.8), (3, 0.9)]
    assert log.replaced == 2
    with open(path, "a") as f:  # a new run from step 1, same folder (--add_version false)
        f.write(step_line(1, 0.5))
    log.refresh()
    assert points(log) == [(1, 0.5)] and log.replaced == 5


def test_the_metrics_tab_says_how_many_steps_a_resumed_run_logged_again(tmp_path: Path):
    (tmp_path / "logging.jsonl").write_text("".join(step_line(s, 0.5) for s in (1, 2, 3, 2)))
    assert (
        Run(tmp_path)
        .describe()
        .endswith(
            "2 logged steps, 0 trajectories; 2 steps logged again by a resumed run: the later lines count"
        )
    )


def test_a_line_without_a_readable_step_follows_the_last_step(tmp_path: Path):
    """With ``--logging_steps 5`` the steps are 5, 10, 15: a line whose step is not a number is drawn after
    the last one, where it was drawn at its place in the file (step 3, back in time, and before step 5)."""
    path = tmp_path / "logging.jsonl"
    lines = [
        step_line(5, 0.1),
        step_line(10, 0.2),
        json.dumps({"loss": 1.0, "reward": 0.3, "step": "x"}) + "\n",
        json.dumps({"loss": 1.0, "reward": 0.4, "global_step/max_steps": "?/20", "step": "20"}) + "\n",
        json.dumps({"loss": 1.0, "reward": 0.5, "step": True}) + "\n",
    ]
    path.write_text("".join(lines))
    log = MetricLog(path)
    log.refresh()
    assert points(log) == [(5, 0.1), (10, 0.2), (11, 0.3), (20, 0.4), (21, 0.5)] and log.replaced == 0


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


def test_an_eval_summary_that_is_not_an_object_or_not_json_is_not_shown(tmp_path: Path):
    (tmp_path / "trajectories.jsonl").write_text("")
    summary = tmp_path / "metrics.json"
    summary.write_text("[1, 2]")
    run = Run(tmp_path)
    assert run.summary == {}
    summary.write_bytes(b"\xff\xfe")
    run.refresh()
    summary.write_text('{"em": 0.5}')
    run.refresh()
    assert run.summary == {"em": 0.5}
    summary.unlink()
    run.refresh()
    assert run.summary == {"em": 0.5}  # the eval's results stay on the page


def test_a_run_resumed_into_a_new_version_folder_is_shown_whole(tmp_path: Path):
    """``swift rlhf --resume_from_checkpoint out/v0-.../checkpoint-1 --output_dir out`` writes into a new
    ``v1-...`` folder whose ``args.json`` names the checkpoint. The viewer, given ``out``, opens the newest
    run and shows the whole one: the stopped run's steps up to its checkpoint (1), then the resumed run's
    (2-4), never the stopped run's own steps 2 and 3, which the resumed run did again."""
    from swift_rlfactory.runs.log import TrajectoryLog
    from swift_rlfactory.trajectory import Trajectory

    stopped, resumed = tmp_path / "out" / "v0-20261201-100000", tmp_path / "out" / "v1-20261201-110000"
    (stopped / "checkpoint-1").mkdir(parents=True)
    resumed.mkdir()
    checkpoint = str(stopped / "checkpoint-1")
    (resumed / "args.json").write_text(json.dumps({"resume_from_checkpoint": checkpoint, "output_dir": ""}))
    for folder, steps in ((stopped, (1, 2, 3)), (resumed, (2, 3))):
        log = TrajectoryLog(folder / "trajectories.jsonl")
        for step in steps:
            question = f"{folder.name[:2]} step {step}"
            log.write([Trajectory(messages=[{"role": "user", "content": question}])], step=step)
        (folder / "logging.jsonl").write_text(
            "".join(step_line(s, s + 0.5 * (folder == resumed)) for s in steps)
        )
    os.utime(stopped, (1, 1))
    run = Run(tmp_path / "out")
    assert run.folder == resumed
    assert points(run.metrics) == [(1, 1.0), (2, 2.5), (3, 3.5)]
    index = run.trajectories
    assert [(e.step, e.prompt) for e in index.current()] == [
        (1, "v0 step 1"),
        (2, "v1 step 2"),
        (3, "v1 step 3"),
    ]
    assert [index.read(e.number)["messages"][0]["content"] for e in index.entries] == [
        "v0 step 1", "v0 step 2", "v0 step 3", "v1 step 2", "v1 step 3",
    ]  # fmt: skip
    assert index.resumed_by(index.entries[1]) is index.entries[3]  # the stopped run's step 2 is read as such
    assert [e.number for e in index.select(Filters(text="STEP"))] == [0, 3, 4]  # text search reads both logs
    assert index.select(Filters(text="v0 step 2")) == []
    assert "resumed from" in run.describe() and str(stopped) in run.describe()
    with open(resumed / "logging.jsonl", "a") as f:  # the resumed run goes on
        f.write(step_line(4, 4.5))
    TrajectoryLog(resumed / "trajectories.jsonl").write(
        [Trajectory(messages=[{"role": "user", "content": "v1 step 4"}])], step=4
    )
    run.refresh()
    assert points(run.metrics)[-1] == (4, 4.5) and index.steps() == [1, 2, 3, 4]
