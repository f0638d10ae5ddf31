"""The step timeline holds on the GPU: the ``timeline/*`` metrics of the 2026-12-06 runs (issue 31's colocate
settings, 6 steps each: nine on one H200, six on one H100; the two-lookup tool workload on one H100: eight runs
of colocate and server mode, ``benchmarks/generation/results/*/logging``) against
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
    assert machines == {"2026-12-06-h200": 9, "2026-12-06-h100": 6, "2026-12-06-h100-tools": 8}
    assert {len(steps(log)) for log in RUNS if log.parent.parent.name != "2026-12-06-h100-tools"} == {6}
    # the tool workload: 5 steps a run, 2 for the synchronous baseline at 2 s (> 2 min a step)
    tools = {log.stem: len(steps(log)) for log in RUNS if log.parent.parent.name == "2026-12-06-h100-tools"}
    assert tools.pop("lookup_sync_tools-2") == 2 and set(tools.values()) == {5}


@pytest.mark.parametrize("log", RUNS, ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_the_phases_add_up_to_the_step_that_ms_swift_timed(log: Path) -> None:
    for number, step in enumerate(steps(log), 1):
        phases = [step[f"{PREFIX}{name}_s"] for name in PHASES]
        assert min(phases) >= 0
        # no phase counted twice: the named phases fit in the step, and what is left ("other") is the rest,
        # never the clamp at zero that would hide an overlap
        assert sum(phases) < step[f"{PREFIX}step_s"]
        assert step[f"{PREFIX}other_s"] == pytest.approx(step[f"{PREFIX}step_s"] - sum(phases), abs=1e-6)
        # the step our callback timed is the step ms-swift timed (its own ``step_time``), plus at most the
        # logging between two steps; and "other" stays small: nothing big goes unnamed. The first step's
        # first log costs ~0.1 s more, once (0.09-0.15 s over the 23 runs; later steps <= 0.06 s)
        bound = 0.25 if number == 1 else 0.1
        assert 0 <= step[f"{PREFIX}step_s"] - step["step_time"] < bound
        assert step[f"{PREFIX}other_s"] < bound
        # the tool chain (the longest trajectory's tool time) lies within the tool phase's span
        assert step[f"{PREFIX}tool_chain_s"] <= step[f"{PREFIX}tools_s"] + 1e-6


@pytest.mark.parametrize("log", RUNS, ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_the_ui_step_timeline_draws_every_phase_of_every_gpu_step(log: Path) -> None:
    metrics = MetricLog(log)
    assert metrics.refresh() == len(steps(log))
    points = metrics.series(PLOTS["Step timeline (s)"])
    drawn = {(p["step"], p["metric"]) for p in points}
    names = [f"{PREFIX}{name}_s" for name in (*PHASES, "other")]
    assert drawn >= {(step, name) for step in range(1, len(steps(log)) + 1) for name in names}
