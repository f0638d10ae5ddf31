"""Steps a resumed run logs again: the latest lines of a step are the ones that count.

Every reader of a run's logs counts each step once by this rule; it is spelled out in ``docs/run-folder.md``
("The resume rule").
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from swift_rlfactory.runs.folder import ARGS, checkpoint_step

T = TypeVar("T")


def resumed_from(folder: str | Path) -> tuple[Path, int] | None:
    """The run folder and checkpoint step that the run in ``folder`` resumed from, read off its
    ``args.json``; ``None`` for a run that did not resume (or whose checkpoint's folder is gone)."""
    try:
        args = json.loads((Path(folder) / ARGS).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # no args.json (not an ms-swift run, or not written yet)
        return None
    checkpoint = args.get("resume_from_checkpoint") if isinstance(args, dict) else None
    if not isinstance(checkpoint, str) or not checkpoint:
        return None
    checkpoint_dir = Path(checkpoint)
    step = checkpoint_step(checkpoint_dir)
    if step is None or not checkpoint_dir.parent.is_dir():
        return None
    return checkpoint_dir.parent, step


def run_chain(folder: str | Path) -> list[tuple[Path, int]]:
    """The runs that the run in ``folder`` continues, oldest first, each with the step of the checkpoint
    the run after it resumed from: its lines of later steps were done again by that run."""
    chain: list[tuple[Path, int]] = []
    seen = {Path(folder).resolve()}
    while (earlier := resumed_from(folder)) is not None and earlier[0].resolve() not in seen:
        seen.add(earlier[0].resolve())
        chain.insert(0, earlier)
        folder = earlier[0]
    return chain


def logged_step(entry: dict[str, Any]) -> int | None:
    """The global step of one ``logging.jsonl`` line (``global_step/max_steps`` is ``"3/100"``), else its
    ``step`` (a whole number, or its digits as text); ``None`` when it has neither (a hand-written
    ``"step": "x"``)."""
    value = entry.get("global_step/max_steps")
    if isinstance(value, str) and value.split("/")[0].isdigit():
        return int(value.split("/")[0])
    step = entry.get("step")
    if isinstance(step, str) and step.isdigit():
        return int(step)
    return trajectory_step(entry)


def trajectory_step(record: dict[str, Any]) -> int | None:
    """The step of one ``trajectories.jsonl`` line (the update it fed), ``None`` for an eval line."""
    step = record.get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


class StepLines:
    """The lines that count, fed one by one in log order (for a reader that follows a growing log).

    Args:
        one_per_step: the log has one line per step (``logging.jsonl``), so a step equal to the last one
            is logged again; in a log of many lines per step (``trajectories.jsonl``) it is one more line.
    """

    def __init__(self, one_per_step: bool = False) -> None:
        self.one_per_step = one_per_step
        self._kept: list[tuple[int, int]] = []  # (step, line id) of the lines that count, in log order

    def add(self, step: int, line: int) -> list[int]:
        """Count ``line`` (any id the caller knows it by) of ``step``; returns the ids of the counted lines
        it replaces, oldest first: none, unless it starts a resumed run."""
        replaced: list[int] = []
        if self._kept:
            last = self._kept[-1][0]
            if step < last or (self.one_per_step and step == last):
                cut = bisect.bisect_left(self._kept, step, key=lambda kept: kept[0])
                replaced = [id_ for _, id_ in self._kept[cut:]]
                del self._kept[cut:]
        self._kept.append((step, line))
        return replaced

    def resume(self, checkpoint: int) -> list[int]:
        """The lines after this are a run's that resumed from the checkpoint of step ``checkpoint`` (in a
        folder of its own, :func:`run_chain`): returns the ids of the counted lines of later steps, which
        that run does again, and stops counting them."""
        cut = bisect.bisect_right(self._kept, checkpoint, key=lambda kept: kept[0])
        replaced = [id_ for _, id_ in self._kept[cut:]]
        del self._kept[cut:]
        return replaced


def latest_lines(
    records: Sequence[T], step_of: Callable[[T], int | None], one_per_step: bool = False
) -> list[T]:
    """``records`` (a whole log, in order) less the lines that a resumed run's later lines replace."""
    lines = StepLines(one_per_step)
    replaced: set[int] = set()
    for number, record in enumerate(records):
        step = step_of(record)
        if step is not None:
            replaced.update(lines.add(step, number))
    return [record for number, record in enumerate(records) if number not in replaced]
