"""The Live metrics tab of a run trained with ``--val-file``: its ``validation.jsonl`` drawn as one chart (the
set, each phrasing shift, the worst shift) and its alarms listed in the status, without a browser."""

from __future__ import annotations

import json
from pathlib import Path

from swift_rlfactory.runs.validation import append_record
from swift_rlfactory.ui import page
from swift_rlfactory.ui.runs import PLOTS, Run

PLOT = "Validation under phrasing shifts (EM)"
ALARM = {"shift": "lowercase", "em": 0.25, "against": "step 0", "baseline": 0.75, "margin": 0.05,
         "text": "shift lowercase: EM 0.2500 is 0.5000 below step 0's (0.7500), more than the margin 0.05"}  # fmt: skip


def validated_run(folder: Path) -> Path:
    """A run folder as ``train --val-file`` leaves it: one logged step, step 0 and checkpoint-2 validated."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "logging.jsonl").write_text(json.dumps({"reward": 0.5, "global_step/max_steps": "1/2"}) + "\n")
    for step, lower, alarms in ((0, 0.75, []), (2, 0.25, [ALARM])):
        append_record(folder, {
            "step": step, "checkpoint": "step-0" if step == 0 else f"checkpoint-{step}", "val/score": 1.0,
            "val/f1": 1.0, "val/shift/lowercase": lower, "val/shift/polite": 1.0, "val/shift/typos": None,
            "val/worst_shift": lower, "worst_shift": "lowercase", "alarms": alarms, "seconds": 3.0,
        })  # fmt: skip
    return folder


def test_the_shifts_are_one_chart_beside_the_set_with_the_worst_shift(tmp_path: Path):
    run = Run(validated_run(tmp_path))
    points = run.series(PLOT)
    assert sorted((p["metric"], p["step"], p["value"]) for p in points) == [
        ("val/score", 0, 1.0),
        ("val/score", 2, 1.0),
        ("val/shift/lowercase", 0, 0.75),
        ("val/shift/lowercase", 2, 0.25),
        ("val/shift/polite", 0, 1.0),
        ("val/shift/polite", 2, 1.0),
        ("val/worst_shift", 0, 0.75),
        ("val/worst_shift", 2, 0.25),
    ]  # fmt: skip  (a shift that applied to no question has no point)
    assert run.series("Reward and components") == [{"step": 1, "metric": "reward", "value": 0.5}]
    assert PLOT in PLOTS


def test_the_alarms_are_in_the_status_and_the_chart_is_drawn(tmp_path: Path):
    outputs = page._plots(str(validated_run(tmp_path)))
    status = outputs[-1]
    assert "**validation** (`validation.jsonl`): step 2 EM 1.0, worst shift lowercase 0.25" in status
    assert "1 validation alarm**" in status and f"- step 2: {ALARM['text']}" in status
    chart = json.loads(outputs[list(PLOTS).index(PLOT)].plot)
    assert {v["metric"] for v in chart["data"]["values"]} == {
        "val/score", "val/shift/lowercase", "val/shift/polite", "val/worst_shift",
    }  # fmt: skip


def test_a_run_without_validation_says_nothing_of_it(tmp_path: Path):
    (tmp_path / "logging.jsonl").write_text(
        json.dumps({"reward": 0.5, "global_step/max_steps": "1/2"}) + "\n"
    )
    outputs = page._plots(str(tmp_path))
    assert "validation.jsonl" not in outputs[-1] and "alarm" not in outputs[-1]
    assert json.loads(outputs[list(PLOTS).index(PLOT)].plot)["layer"][0]["mark"]["type"] == "text"  # empty
