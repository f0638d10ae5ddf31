"""A run resumed into its own folder logs the steps after its checkpoint again: every reader counts each
step once, by its latest lines (:mod:`swift_rlfactory.runs.resume`).

The logs are written as the run writes them: ``trajectories.jsonl`` by the real :class:`TrajectoryLog`,
``logging.jsonl`` as ms-swift's lines (one per step, then its closing summary).
"""

from __future__ import annotations

import json
from pathlib import Path

from swift_rlfactory.rewards.rescore import load_recorded
from swift_rlfactory.runs.log import TrajectoryLog, read_steps, read_trajectories
from swift_rlfactory.runs.resume import StepLines, latest_lines, logged_step, resumed_from, run_chain
from swift_rlfactory.trajectory import Trajectory

# Stopped after step 3 (checkpoint at step 1), then resumed from checkpoint-1: steps 2-4 again.
STOPPED, RESUMED = (1, 2, 3), (2, 3, 4)


def write_runs(folder: Path) -> None:
    log = TrajectoryLog(folder / "trajectories.jsonl")
    with open(folder / "logging.jsonl", "a") as metrics:
        for run, steps in (("stopped", STOPPED), ("resumed", RESUMED)):
            for step in steps:
                group = [
                    Trajectory(messages=[{"role": "user", "content": f"{run} {step} {i}"}], row={"run": run})
                    for i in range(2)
                ]
                log.write(group, step=step)
                line = {"loss": 0.1, "reward": step / 10, "run": run, "global_step/max_steps": f"{step}/4"}
                metrics.write(json.dumps(line) + "\n")
            metrics.write(json.dumps({"train_runtime": 1.0, "run": run}) + "\n")  # the closing summary


EXPECTED = [(1, "stopped"), (2, "resumed"), (3, "resumed"), (4, "resumed")]


def test_trajectory_readers_count_a_relogged_step_once(tmp_path: Path):
    write_runs(tmp_path)
    read = read_trajectories(tmp_path / "trajectories.jsonl")
    assert [(t["step"], t["row"]["run"]) for t in read[::2]] == EXPECTED and len(read) == 8
    recorded = load_recorded(tmp_path / "trajectories.jsonl")
    assert [r.line for r in recorded] == [1, 2, 7, 8, 9, 10, 11, 12]  # the stopped run's 2 and 3 are out
    assert [r.trajectory.row["run"] for r in recorded[::2]] == [run for _, run in EXPECTED]
    assert [r.line for r in load_recorded(tmp_path, limit=3)] == [1, 2, 7]


def test_train_reads_each_logged_step_once(tmp_path: Path):
    write_runs(tmp_path)
    steps = read_steps(tmp_path / "logging.jsonl")
    assert [(logged_step(s), s["run"]) for s in steps] == EXPECTED


def test_a_step_logged_again_at_the_same_step_replaces_only_where_a_step_has_one_line():
    logged = [{"step": s, "n": n} for n, s in enumerate([1, 2, 2, 3, 1, 2])]
    one = latest_lines(logged, logged_step, one_per_step=True)
    many = latest_lines(logged, logged_step)
    assert [r["n"] for r in one] == [4, 5]  # 2 again replaced 2; then 1 again replaced everything
    assert [r["n"] for r in many] == [4, 5]
    assert [r["n"] for r in latest_lines(logged[:4], logged_step)] == [0, 1, 2, 3]  # more lines of step 2
    assert [r["n"] for r in latest_lines(logged[:4], logged_step, one_per_step=True)] == [0, 2, 3]
    lines = StepLines()
    assert [lines.add(s, n) for n, s in enumerate([1, 2, 3, 3, 2])] == [[], [], [], [], [1, 2, 3]]
    eval_lines = [{"index": 0}, {"index": 1}]  # no steps: nothing to replace
    assert latest_lines(eval_lines, logged_step) == eval_lines


def test_a_run_chain_is_read_off_args_json_and_stops_where_it_cannot_be_followed(tmp_path: Path):
    def run(name: str, resumed: str | None = None, args: str | None = None) -> Path:
        folder = tmp_path / name
        (folder / "checkpoint-2").mkdir(parents=True)
        if args is not None:
            (folder / "args.json").write_text(args)
        elif resumed is not None:
            (folder / "args.json").write_text(json.dumps({"resume_from_checkpoint": resumed}))
        return folder

    first = run("v0", args="{not json")  # a torn or foreign args.json: no chain, no error
    second = run("v1", str(first / "checkpoint-2"))
    third = run("v2", str(second / "checkpoint-2"))
    assert run_chain(third) == [(first, 2), (second, 2)]
    assert run_chain(run("v3", str(tmp_path / "gone" / "checkpoint-2"))) == []  # its folder was removed
    assert run_chain(run("v4", str(first / "last"))) == []  # not a checkpoint-<step> folder
    loop_a = run("a", str(tmp_path / "b" / "checkpoint-2"))
    run("b", str(loop_a / "checkpoint-2"))  # hand-edited into a loop: each run once
    assert run_chain(loop_a) == [(tmp_path / "b", 2)]
    assert resumed_from(tmp_path / "nowhere") is None


def test_the_rewards_cli_scores_a_resumed_runs_whole_chain_as_the_viewer_shows_it(tmp_path: Path, capsys):
    """``rewards --trajectories OUTPUT_DIR`` of a run resumed into a folder of its own (``--add_version``)
    scores the stopped run's lines up to the checkpoint, then the resumed run's, each named by its file."""
    import os

    from swift_rlfactory.cli import main

    from .conftest import AGENT_ENV

    out = tmp_path / "output"
    stopped, resumed = out / "v0-1", out / "v1-2"
    for folder, run, steps in ((stopped, "stopped", STOPPED), (resumed, "resumed", RESUMED)):
        folder.mkdir(parents=True)
        log = TrajectoryLog(folder / "trajectories.jsonl")
        for step in steps:
            log.write([Trajectory(messages=[{"role": "user", "content": f"{run} {step}"}])], step=step)
    (stopped / "checkpoint-1").mkdir()
    (resumed / "args.json").write_text(json.dumps({"resume_from_checkpoint": str(stopped / "checkpoint-1")}))
    os.utime(stopped, (1, 1))  # the resumed run is the newest folder, which the CLI is pointed at
    assert main(["rewards", str(AGENT_ENV), "--trajectories", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [row["question"] for row in report["rows"]] == ["stopped 1", "resumed 2", "resumed 3", "resumed 4"]
    files = [row["file"] for row in report["rows"]]
    assert files == [str(stopped / "trajectories.jsonl")] + [str(resumed / "trajectories.jsonl")] * 3
    assert main(["rewards", str(AGENT_ENV), "--trajectories", str(out)]) == 0
    table = capsys.readouterr().out
    assert "v0-1:1" in table and "v1-2:3" in table, table
