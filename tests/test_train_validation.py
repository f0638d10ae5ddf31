"""``swift-rlfactory train --val-file``: step 0 and each saved checkpoint of a real CPU GRPO run of the tiny
Qwen3 scored on a val set and its phrasing shifts, an alarm against a reference that scores higher, the stop
it asks for, and the checkpoint chosen on the worst shift against the starting model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swift_rlfactory.runs.log import read_steps
from swift_rlfactory.runs.validation import alarm_lines, metric_points, read_records

from .conftest import AGENT_ENV, AGENT_PAIRS

STEPS, SAVE_EVERY = 40, 2
pytestmark = pytest.mark.timeout(1500)  # a CPU GRPO run and three or more evals of the tiny model


def rows(pairs) -> list[dict]:
    return [{"messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "solution": str(a + b)}
            for a, b in pairs]  # fmt: skip


@pytest.fixture(scope="module")
def run(agent_model: Path, tmp_path_factory) -> tuple[Path, int, str]:
    work = tmp_path_factory.mktemp("val")
    data, val = work / "train.jsonl", work / "val.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows(AGENT_PAIRS * 8)))
    val.write_text("".join(json.dumps(r) + "\n" for r in rows(AGENT_PAIRS)))
    reference = work / "best.json"  # an earlier model that scored every question and every shift
    reference.write_text(json.dumps({"em": 1.0, "shift/lowercase/em": 1.0, "shift/polite/em": 1.0}))
    proc = subprocess.run(
        [
            sys.executable, "-m", "swift_rlfactory.cli", "train", "--model", str(agent_model), "--model-type", "qwen3", "--template", "qwen3",
            "--env", str(AGENT_ENV), "--dataset", str(data), "--output-dir", str(work / "out"), "--mode", "cpu",
            "--steps", str(STEPS), "--num-generations", "2", "--batch-size", "4", "--max-completion-length", "96",
            "--val-file", str(val), "--val-shifts", "lowercase,polite", "--val-margin", "0",
            "--val-reference", str(reference), "--val-stop-on-alarm", "--val-engine", "transformers",
            "--", "--save_steps", str(SAVE_EVERY),
        ],
        capture_output=True, text=True, timeout=1500, env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"},
    )  # fmt: skip
    [run_dir] = (work / "out").iterdir()
    return run_dir, proc.returncode, proc.stdout + proc.stderr


def test_each_checkpoint_is_scored_on_the_set_and_each_shift(run):
    run_dir, code, printed = run
    assert code == 0, printed
    records = read_records(run_dir)
    assert records[0]["step"] == 0 and records[0]["checkpoint"] == "step-0"
    steps = [r["step"] for r in records]
    assert steps == sorted(steps) and len(steps) >= 2 and steps[1] == SAVE_EVERY
    for record in records:
        assert {"val/score", "val/shift/lowercase", "val/shift/polite", "val/worst_shift"} <= set(record)
        shifts = [record["val/shift/lowercase"], record["val/shift/polite"]]
        assert record["val/worst_shift"] == min(s for s in shifts if s is not None)
        eval_metrics = json.loads((Path(record["eval"]) / "metrics.json").read_text())
        assert eval_metrics["em"] == record["val/score"] and eval_metrics["questions"] == len(AGENT_PAIRS)
    points = metric_points(records)
    assert {p["metric"] for p in points} >= {"val/score", "val/shift/lowercase", "val/worst_shift"}
    assert "validation step 0: EM" in printed


def test_a_shift_below_the_reference_raises_an_alarm_and_stops_training(run):
    run_dir, _, printed = run
    records = read_records(run_dir)
    checkpoint = records[1]
    below = [k for k in ("val/score", "val/shift/lowercase", "val/shift/polite") if checkpoint[k] < 1.0]
    assert below, "the tiny model scored every question: the reference cannot be above it"
    assert {(a["shift"], a["against"]) for a in checkpoint["alarms"] if a["against"] == "reference"} == {
        ("original" if k == "val/score" else k.removeprefix("val/shift/"), "reference") for k in below
    }
    assert "VALIDATION ALARM" in printed and alarm_lines(records)
    assert (run_dir / "STOP").is_file()
    logged = read_steps(run_dir / "logging.jsonl")
    assert 0 < len(logged) < STEPS  # the trainer stopped after the alarm, long before its last step
    summary = json.loads((run_dir / "validation.json").read_text())
    assert summary["stopped_on_alarm"] is True and summary["alarms"]


def test_the_checkpoint_is_chosen_on_the_worst_shift_against_the_starting_model(run):
    # step 0 is the incumbent: a checkpoint ranked above it on the worst shift must also win on more of the
    # val questions than a coin would, which 4 questions cannot show (4 of 4: p 0.0625), so step 0 is kept
    run_dir, _, printed = run
    records = read_records(run_dir)
    top = max(records, key=lambda r: (r["val/worst_shift"], r["val/score"], -r["step"]))
    summary = json.loads((run_dir / "validation.json").read_text())
    assert summary["chosen_by"] == "worst-shift" and summary["checkpoints"] == len(records) - 1
    assert summary["chosen"] == "step-0" and summary["best_checkpoint"] is None
    assert summary["score"] == records[0]["val/worst_shift"]
    if top["step"] == 0:
        assert summary["gain"] is None
    else:
        gain = summary["gain"]
        assert gain["set"].startswith("shifts/") and gain["questions"] == len(AGENT_PAIRS)
        assert gain["p"] >= 0.0625 and gain["beats"] is False
    assert "no checkpoint beat the starting model by worst-shift" in printed


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--val-stop-on-alarm"], "--val-reference and --val-stop-on-alarm need --val-file"),
        (["--val-file", "missing.jsonl"], "--val-file missing.jsonl: no such file"),
        (["--val-file", "{val}", "--val-shifts", "lowercase,nonesuch"], "nonesuch"),
        (["--val-file", "{val}", "--val-reference", "{val}"], "not an eval's metrics.json"),
    ],
)
def test_a_wrong_validation_flag_stops_train_before_swift_starts(tmp_path: Path, capsys, extra, message):
    from swift_rlfactory.cli import main

    val = tmp_path / "val.jsonl"
    val.write_text("".join(json.dumps(r) + "\n" for r in rows(AGENT_PAIRS)))
    argv = ["train", "--output-dir", str(tmp_path / "out"), *(a.format(val=val) for a in extra)]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
