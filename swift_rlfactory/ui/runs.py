"""A run or eval folder as the viewer reads it: its metric history and its trajectory log.

A folder holding runs under version folders is opened at its newest run; a run resumed from another one's
checkpoint is shown whole, the runs it continues first (``docs/run-folder.md``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swift_rlfactory.runs.folder import LOGGING, TRAJECTORIES, read_summary, resolve_run
from swift_rlfactory.runs.resume import StepLines, logged_step, run_chain
from swift_rlfactory.runs.validation import SCORE, SHIFT, WORST, alarm_lines, metric_points, read_records

from .charts import finite
from .index import TrajectoryIndex
from .tail import ChainTail

# Plot name -> which metric keys it draws (a key ending in "/" is a prefix)
PLOTS: dict[str, tuple[str, ...]] = {
    "Reward and components": ("reward", "rlfactory/"),
    "Tool calls per trajectory": ("tools/calls_per_trajectory", "tools/max_tool_turns"),
    "Tool error and cache hit rate": ("tools/error_rate", "tools/cache_hit_rate"),
    "Tool latency (s)": ("tools/latency_p50_s", "tools/latency_p95_s"),
    "Turns": ("turns",),
    "Stop reasons": ("stop/",),
    "Step timeline (s)": (
        "timeline/generation_s",
        "timeline/tools_s",
        "timeline/tool_chain_s",
        "timeline/reward_s",
        "timeline/weight_sync_s",
        "timeline/train_s",
        "timeline/other_s",
    ),
    # validation.jsonl's, not logging.jsonl's: each checkpoint on the val set and each phrasing shift
    (VALIDATION_PLOT := "Validation under phrasing shifts (EM)"): (SCORE, WORST, SHIFT),
}


def wanted(key: str, patterns: tuple[str, ...]) -> bool:
    """Whether a metric key belongs to a plot."""
    return any(key.startswith(p) if p.endswith("/") else key == p for p in patterns)


class MetricLog:
    """``logging.jsonl``, read on from where it was last read (:class:`~swift_rlfactory.ui.tail.JsonlTail`);
    keeps the training steps' lines (the run's closing summary and eval lines are not steps), one per step.

    A step logged again (by a run resumed from a checkpoint into the same ``--output_dir``, or a new run in
    the same folder) counts by its later line, and every kept step from that one on is dropped, by the rule
    every reader of a run's logs follows (:mod:`swift_rlfactory.runs.resume`). A line without a readable step is
    taken for the step after the last one. ``earlier`` are the logs of the runs this one continues, oldest
    first, each with the step of the checkpoint the run after it resumed from
    (:func:`~swift_rlfactory.runs.resume.run_chain`).
    """

    def __init__(self, path: str | Path, earlier: Sequence[tuple[Path, int]] = ()):
        self.path = Path(path)
        self.rows: list[dict[str, Any]] = []  # in step order, each with its step as "_step"
        self.replaced = 0  # steps logged again by a resumed run: their earlier lines were dropped
        self._checkpoints = [step for _, step in earlier]  # where the run after each earlier log resumed
        self._tail = ChainTail([*(log for log, _ in earlier), self.path])
        self._start()
        self._lock = threading.Lock()

    def _start(self) -> None:
        self.rows, self.replaced, self._log = [], 0, 0
        self._steps = StepLines(one_per_step=True)  # ids: places in rows

    @property
    def skipped(self) -> int:
        """Lines that are not JSON objects (a torn last line is not one: it is read once whole)."""
        return self._tail.skipped

    def refresh(self) -> int:
        """Read lines appended since the last call; returns how many training steps they held."""
        with self._lock:  # two page handlers may refresh one run at once
            restarted, records = self._tail.read()
            if restarted:
                self._start()
            added = 0
            for log, record in records:
                entry = record.value
                if "loss" not in entry and "reward" not in entry:  # not a training step
                    continue
                for checkpoint in self._checkpoints[self._log : log]:  # the first line of a resumed run
                    self._cut(self._steps.resume(checkpoint))
                self._log = log
                step = logged_step(entry)
                if step is None:
                    step = self.rows[-1]["_step"] + 1 if self.rows else 1
                self._cut(self._steps.add(step, len(self.rows)))
                entry["_step"] = step
                self.rows.append(entry)
                added += 1
            return added

    def _cut(self, replaced: list[int]) -> None:
        """Drop the kept rows from ``replaced[0]`` on (the rows are in step order, as the kept lines)."""
        if replaced:
            self.replaced += len(replaced)
            self.rows = self.rows[: replaced[0]]  # a new list: a page reading the old one is not cut short

    def series(self, patterns: tuple[str, ...]) -> list[dict[str, Any]]:
        """Long-form points ``{"step", "metric", "value"}`` for the keys a plot draws; a value that is not a
        finite number (``NaN``, ``None``, text) is no point."""
        return [
            {"step": row["_step"], "metric": key, "value": number}
            for row in self.rows
            for key, value in row.items()
            if wanted(key, patterns) and (number := finite(value)) is not None
        ]


class Run:
    """One opened run or eval folder: its metric log and its trajectory index, both refreshable."""

    def __init__(self, folder: str | Path):
        self.folder = resolve_run(folder)
        self.chain = run_chain(self.folder)  # the runs this one resumed, oldest first
        self.metrics = MetricLog(self.folder / LOGGING, [(run / LOGGING, step) for run, step in self.chain])
        self.trajectories = TrajectoryIndex(
            self.folder / TRAJECTORIES, [(run / TRAJECTORIES, step) for run, step in self.chain]
        )
        self.summary: dict[str, Any] = {}
        self.validation: list[dict[str, Any]] = []  # validation.jsonl's records, when train validated
        self.refresh()

    def series(self, plot: str) -> list[dict[str, Any]]:
        """The points of the plot ``plot`` (a name of :data:`PLOTS`): from ``validation.jsonl`` for the
        validation plot, from ``logging.jsonl`` for the others."""
        if plot == VALIDATION_PLOT:
            return [p for p in metric_points(self.validation) if wanted(p["metric"], PLOTS[plot])]
        return self.metrics.series(PLOTS[plot])

    def validation_status(self) -> str:
        """The validation's latest scores and every alarm, as markdown (empty without validation)."""
        if not self.validation:
            return ""
        last = self.validation[-1]
        worst = last.get(WORST)
        text = (
            f"**validation** (`validation.jsonl`): step {last.get('step')} EM {last.get(SCORE)}, worst shift "
            f"{last.get('worst_shift') or '-'} {worst if worst is not None else '-'}"
        )
        alarms = alarm_lines(self.validation)
        if alarms:
            text += f"\n\n**⚠ {len(alarms)} validation alarm{'' if len(alarms) == 1 else 's'}**\n\n"
            text += "".join(f"- {line}\n" for line in alarms)
        return text

    def refresh(self) -> None:
        """Pick up what the run wrote since the last refresh."""
        self.metrics.refresh()
        self.validation = read_records(self.folder)  # a few lines per checkpoint: read whole
        self.trajectories.refresh()
        summary = read_summary(self.folder)  # an eval's aggregate metrics
        if summary is not None:  # else none (yet, or removed), or being written: read it next time
            self.summary = summary

    def describe(self) -> str:
        """One line for the page: where, how many steps and trajectories."""
        steps, trajectories = len(self.metrics.rows), self.trajectories.count()
        line = (
            f"{self.folder}: {steps} logged step{'' if steps == 1 else 's'}, "
            f"{trajectories} trajector{'y' if trajectories == 1 else 'ies'}"
        )
        for run, step in reversed(self.chain):  # said, so steps from another folder are no mystery
            line += f"; resumed from {run} at step {step}"
        if skipped := self.metrics.skipped:  # said, so a step missing from the charts is not a mystery
            line += (
                f"; {skipped} line{'' if skipped == 1 else 's'} of {LOGGING} "
                f"{'is' if skipped == 1 else 'are'} not JSON objects and left out"
            )
        if replaced := self.metrics.replaced:  # said, so a run with fewer steps than it had is no mystery
            line += (
                f"; {replaced} step{'' if replaced == 1 else 's'} logged again by a resumed run: the "
                "later lines count"
            )
        return line


class RunCache:
    """Opened runs by folder, so every refresh of a page reuses one index per run."""

    def __init__(self) -> None:
        self._runs: dict[str, Run] = {}
        self._lock = threading.Lock()

    def open(self, folder: str | Path) -> Run:
        """The run in ``folder`` (opened once), refreshed."""
        key = str(resolve_run(folder).resolve())
        with self._lock:
            run = self._runs.get(key)
            if run is None:
                run = self._runs[key] = Run(key)
                return run
        run.refresh()
        return run
