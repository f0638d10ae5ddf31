"""The trajectory log (every finished trajectory as one JSON line) and the step log's reader.

Records, write rules and failure handling: ``docs/run-folder.md``.
"""

from __future__ import annotations

import copy
import errno
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from swift_rlfactory.redaction import redact_data
from swift_rlfactory.runs import identity, stream
from swift_rlfactory.runs.resume import logged_step, trajectory_step
from swift_rlfactory.runs.stream import Position
from swift_rlfactory.trajectory import Trajectory

logger = logging.getLogger(__name__)


class TrajectoryLog:
    """Appends trajectories to a JSONL file, creating its folder on first use.

    ``errors`` counts the writes that failed; :meth:`drain_errors` gives those since its last call.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.errors = 0
        self._errors_reported = 0
        self._warned: set[tuple[str, int | None]] = set()

    def write(self, trajectories: Sequence[Trajectory], step: int | None = None) -> bool:
        """Append one line per trajectory; ``False`` when the write failed (counted and warned, never raised:
        a full disk must not end a training run)."""
        if not trajectories:
            return True
        now = time.time()
        lines = "".join(_line(t, step, now) + "\n" for t in trajectories)
        try:
            append_lines(self.path, lines)
        except OSError as exc:
            self.errors += 1
            kind = (type(exc).__name__, exc.errno)
            if kind not in self._warned:  # a full disk fails every step: say so once, count the rest
                self._warned.add(kind)
                logger.warning(
                    "trajectory log %s: cannot write (%s: %s); %d trajectories of step %s are not logged, "
                    "training goes on; later failures like this one are only counted (log/write_errors)",
                    self.path, type(exc).__name__, exc.strerror or exc, len(trajectories), step,
                )  # fmt: skip
            return False
        return True

    def drain_errors(self) -> int:
        """Failed writes since the last call (the training metric ``log/write_errors`` of one batch)."""
        new, self._errors_reported = self.errors - self._errors_reported, self.errors
        return new


def _line(trajectory: Trajectory, step: int | None, now: float) -> str:
    """One trajectory's JSON line. A row column JSON cannot hold (a tuple key, an object that cannot be
    copied, a cycle: a dataset or a reward put it there) is written as its ``str``, so the line is kept."""
    try:
        return _dumps(trajectory.to_dict(), step, now)
    except (TypeError, ValueError, RecursionError):  # to_dict deep-copies the row; json then writes it
        row = {str(k): v if _loggable(v) else _text(v) for k, v in trajectory.row.items()}
        return _dumps(replace(trajectory, row=row).to_dict(), step, now)


def _dumps(data: dict[str, Any], step: int | None, now: float) -> str:
    record = {"step": step, "time": now, "run": identity.run_id(), "rank": identity.rank(), **data}
    return json.dumps(redact_data(record), ensure_ascii=False, default=str)


def _loggable(value: Any) -> bool:
    try:
        json.dumps(copy.deepcopy(value), default=str)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _text(value: Any) -> str:
    try:
        return str(value)
    except Exception:
        return f"<a {type(value).__name__} that cannot be printed>"


def append_lines(path: Path, text: str) -> None:
    """Append ``text`` with one ``write`` on an ``O_APPEND`` file: writers never interleave inside it, and a
    crash tears at most the last line. A lone surrogate (half an emoji a model wrote, ``"\\ud800"`` in its
    JSON) is written as its ``\\ud800`` escape, which reads back as the same string inside JSON, instead of
    failing the write (and every later one of the same episode on resume)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8", "backslashreplace")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        written = os.write(fd, data)
    finally:
        os.close(fd)
    if written < len(data):  # a disk that fills mid-write takes part of it and raises on the next one
        raise OSError(errno.ENOSPC, f"wrote {written} of {len(data)} bytes (disk full?)", str(path))


def iter_trajectories(path: str | Path) -> Iterator[dict]:
    """Every line of a trajectory log that counts, parsed, read line by line (:mod:`swift_rlfactory.runs.
    stream`); a compressed log (``.gz``, as the GPU benchmarks return them) is decompressed as it is read.
    A line that is not JSON (torn by a writer killed mid-line, then appended to by a resumed run) is
    skipped with one warning naming it, and the lines of steps a resumed run logged again are left out
    (:mod:`swift_rlfactory.runs.resume`)."""
    path = Path(path)
    skipped: list[tuple[int, str]] = []

    def lines() -> Iterator[tuple[Position, Any]]:
        skipped.clear()  # each pass reads the file again
        return stream.log_lines(path, skipped)

    for _, record in stream.counted(lines, _step_of_object):
        yield record
    if skipped:
        logger.warning(
            "%s: skipped %d lines that are not JSON (torn by a writer killed mid-line?): %s",
            path, len(skipped), "; ".join(f"line {n}: {why}" for n, why in skipped[:3]),
        )  # fmt: skip


def read_trajectories(path: str | Path) -> list[dict]:
    """:func:`iter_trajectories` as a list, for a log known to be small."""
    return list(iter_trajectories(path))


def last_step_trajectories(path: str | Path) -> tuple[int, list[dict]]:
    """How many trajectories count in the log, and those of its last step (a line without a step taken
    for step 0), which ``train``'s summary picks one of: one step's lines in memory, never the log's."""
    count, last, kept = 0, -1, []
    for record in iter_trajectories(path):
        count += 1
        step = record.get("step") or 0
        if step > last:
            last, kept = step, []
        if step == last:
            kept.append(record)
    return count, kept


def read_steps(logging_jsonl: Path) -> list[dict]:
    """The per-step training records of an ms-swift ``logging.jsonl`` (the lines that carry ``reward``),
    each step once: a step logged again by a resumed run counts by its latest line (:mod:`swift_rlfactory.runs.resume`).
    The file is read line by line; a line being written (not JSON yet) is skipped."""
    if not logging_jsonl.is_file():
        return []

    def step_of(record: Any) -> int | None:
        return logged_step(record) if _is_step(record) else None

    lines = partial(stream.log_lines, logging_jsonl)
    return [r for _, r in stream.counted(lines, step_of, one_per_step=True) if _is_step(r)]


def _is_step(record: Any) -> bool:
    return isinstance(record, dict) and "reward" in record


def _step_of_object(record: Any) -> int | None:
    return trajectory_step(record) if isinstance(record, dict) else None
