"""The step timeline holds on the GPU: the ``timeline/*`` metrics of the 2026-12-06 runs (issue 31's colocate
settings, 6 steps each: nine on one H200, six on one H100, ``benchmarks/generation/results/*/logging``) against
ms-swift's own clock of the same steps, and as the UI's "Step timeline" chart reads them.

The logs are the runs' own ``logging.jsonl`` lines, cut to the loss, the reward, ms-swift's ``step_time`` and
the ``timeline/*`` keys (``benchmarks/generation/RESULTS.md`` says how they were made).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swift_rlfactory.adapters.swift_timeline import PHASES, PREFIX
from swift_rlfactory.ui.runs import PLOTS, MetricLog

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks/generation/results"
RUNS = sorted(RESULTS.glob("*/logging/*.jsonl"))


def steps(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_the_gpu_logs_are_there() -> None:
    machines = {log.parent.parent.name: sum(1 for run in RUNS if run.parent == log.parent) for log in RUNS}
    assert machines == {"2026-12-06-h200": 9, "2026-12-06-h100": 6}
    assert all(len(steps(log)) == 6 for log in RUNS)


@pytest.mark.parametrize("log", RUNS, ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_the_phases_add_up_to_the_step_that_ms_swift_timed(log: Path) -> None:
    for step in steps(log):
        phases = [step[f"{PREFIX}{name}_s"] for name in PHASES]
        assert min(phases) >= 0
        # no phase counted twice: the named phases fit in the step, and what is left ("other") is the rest,
        # never the clamp at zero that would hide an overlap
        assert sum(phases) < step[f"{PREFIX}step_s"]
        assert step[f"{PREFIX}other_s"] == pytest.approx(step[f"{PREFIX}step_s"] - sum(phases), abs=1e-6)
        # the step our callback timed is the step ms-swift timed (its own ``step_time``), plus at most the
        # logging between two steps; and "other" stays small: nothing big goes unnamed
        assert 0 <= step[f"{PREFIX}step_s"] - step["step_time"] < 0.15
        assert step[f"{PREFIX}other_s"] < 0.15
        # the tool chain (the longest trajectory's tool time) lies within the tool phase's span
        assert step[f"{PREFIX}tool_chain_s"] <= step[f"{PREFIX}tools_s"] + 1e-6


@pytest.mark.parametrize("log", RUNS, ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_the_ui_step_timeline_draws_every_phase_of_every_gpu_step(log: Path) -> None:
    metrics = MetricLog(log)
    assert metrics.refresh() == 6
    points = metrics.series(PLOTS["Step timeline (s)"])
    drawn = {(p["step"], p["metric"]) for p in points}
    names = [f"{PREFIX}{name}_s" for name in (*PHASES, "other")]
    assert drawn >= {(step, name) for step in range(1, 7) for name in names}
