"""The Live metrics charts without a browser: what each chart is given for 0, 1 and many logged steps, and
for rows whose values are NaN, inf, None, text or missing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from swift_rlfactory.ui.charts import EMPTY, MAX_DOTS, MAX_POINTS, line_chart
from swift_rlfactory.ui.runs import PLOTS, Run


def write_log(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    # json.dumps writes NaN and Infinity as ms-swift's logger does; json.loads reads them back
    (folder / "logging.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def step(n: int, **metrics) -> dict:
    return {"loss": 0.0, "global_step/max_steps": f"{n}/100", **metrics}


def test_one_step_is_a_dot_on_a_padded_numeric_axis(tmp_path: Path):
    run = Run(write_log(tmp_path, [step(1, reward=1.05, **{"rlfactory/em": 0.75})]))
    spec = line_chart("Reward", run.metrics.series(PLOTS["Reward and components"]))
    assert spec is not None
    line, dots = spec["layer"]
    assert line["mark"]["type"] == "line" and dots["mark"]["type"] == "point"
    assert [p["dot"] for p in spec["data"]["values"]] == [True, True]
    x, y = dots["encoding"]["x"], dots["encoding"]["y"]
    assert x["type"] == y["type"] == "quantitative"  # numbers, never categories
    assert x["scale"]["domain"] == [0, 2]  # a single step sits mid-axis, not on a zero-width domain
    assert "domain" not in y["scale"]  # two values: vega picks the range itself
    json.dumps(spec, allow_nan=False)  # what the browser gets is strict JSON

    spec = line_chart("Turns", run.metrics.series(("turns",)))  # no row has it
    assert spec["title"] == "Turns" and spec["layer"][0]["mark"]["text"] == EMPTY


@pytest.mark.parametrize("value", [2.0, 0.0, -3.0])
def test_a_single_value_gets_a_range_around_it(tmp_path: Path, value: float):
    run = Run(write_log(tmp_path, [step(1, turns=value), step(2, turns=value)]))
    spec = line_chart("Turns", run.metrics.series(("turns",)))
    low, high = spec["layer"][0]["encoding"]["y"]["scale"]["domain"]
    assert low < value < high


def test_values_that_are_not_finite_numbers_are_no_points(tmp_path: Path):
    rows = [
        step(1, reward=0.5, turns=1.0),
        step(2, reward=math.nan, turns=None),
        step(3, reward=math.inf, turns="many"),
        step(4, reward=-math.inf, turns=True),
        step(5, reward=0.75),  # turns missing from this row
        {"loss": 0.1, "step": "x", "reward": 0.9},  # a hand-written step number: its position counts
    ]
    run = Run(write_log(tmp_path, rows))
    assert [r["_step"] for r in run.metrics.rows] == [1, 2, 3, 4, 5, 6]
    rewards = run.metrics.series(("reward",))
    assert [(p["step"], p["value"]) for p in rewards] == [(1, 0.5), (5, 0.75), (6, 0.9)]
    assert [(p["step"], p["value"]) for p in run.metrics.series(("turns",))] == [(1, 1.0)]
    json.dumps(line_chart("Reward", rewards), allow_nan=False)


def test_a_metric_in_some_rows_only_keeps_its_dots_among_long_series(tmp_path: Path):
    rows = [step(n, reward=n / 10) for n in range(1, 201)]
    rows[99]["rlfactory/em"] = 1.0  # logged once
    spec = line_chart("Reward", Run(write_log(tmp_path, rows)).metrics.series(("reward", "rlfactory/")))
    dotted = {p["metric"] for p in spec["data"]["values"] if p["dot"]}
    assert dotted == {"rlfactory/em"}  # 200 rewards are a line; the lone value is still a visible dot
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == ["reward", "rlfactory/em"]
    assert MAX_DOTS < 200


def test_many_steps_are_thinned_per_metric_keeping_the_last(tmp_path: Path):
    total = 3 * MAX_POINTS + 7
    rows = [step(n, reward=float(n), turns=2.0) for n in range(1, total + 1)]
    spec = line_chart("Reward", Run(write_log(tmp_path, rows)).metrics.series(("reward", "turns")))
    values = spec["data"]["values"]
    for metric in ("reward", "turns"):
        steps = [p["step"] for p in values if p["metric"] == metric]
        assert len(steps) <= MAX_POINTS + 1 and steps[0] == 1 and steps[-1] == total
    assert "1 step in 4 shown" in spec["title"]
    assert len(spec["layer"]) == 1  # no dots on a long line
