"""A run's logs read line by line, the resume rule applied, in memory bounded by the steps, not the log.

Two passes over the file (or a run's chain of files): the first keeps only step numbers and finds where
resumed runs restart (:class:`Restarts`), the second yields the lines that count. How and why:
``docs/run-folder.md`` ("How readers stream").
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from swift_rlfactory.data import jsonl

Position = tuple[int, int]  # (the log's place in a run's chain, the line's number in it)


class NotJSON(ValueError):
    """A line that is not JSON; its message says why (never quoting more than the line's start), ``reason``
    is the parser's own word (``Expecting value``)."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


def raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number from 1, bytes)`` of each line of ``path``, decompressed as read
    (:func:`~swift_rlfactory.data.jsonl.open_binary`); a line keeps its ``\\n`` (a last line without one
    was torn by a crash, or is being written). Split at ``\\n`` only, never inside a JSON string."""
    with jsonl.open_binary(path) as f:
        try:
            yield from enumerate(f, start=1)
        except jsonl.DECOMPRESSION_ERRORS as exc:  # a compressed log cut short
            raise ValueError(f"{path}: not complete compressed data ({exc})") from None


def parse(raw: bytes | str) -> Any:
    """The JSON value of one line (a byte order mark opening it is read past; bytes that are not UTF-8
    read as U+FFFD); ``None`` for a blank line. Raises :class:`NotJSON`."""
    text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    text = text.removeprefix("\ufeff")
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        why = f"not valid JSON ({exc.msg}, column {exc.colno}): {text.rstrip()[:80]!r}"
        raise NotJSON(why, exc.msg) from None


class Restarts:
    """Where resumed runs restart, from the steps of the lines fed in log order: the spans of lines that a
    resumed run's lines replace. Holds one ``(step, first line)`` per step still counted, never the lines.

    The rule is :class:`~swift_rlfactory.runs.resume.StepLines`' (``one_per_step`` as there): a line whose
    step is lower than the last counted one's (or equal, with one line a step) drops every counted line of
    its step and later ones, which are the counted lines from the first of them on.
    """

    def __init__(self, one_per_step: bool = False) -> None:
        self.one_per_step = one_per_step
        self._steps: list[tuple[int, Position]] = []  # (step, its first counted line), steps ascending
        self._spans: list[tuple[Position, Position]] = []  # [start, end) of lines a resumed run replaced

    def add(self, step: int, at: Position) -> None:
        """The line at ``at`` is of ``step``."""
        if self._steps:
            last = self._steps[-1][0]
            if step < last or (self.one_per_step and step == last):
                self._cut(bisect.bisect_left(self._steps, step, key=lambda kept: kept[0]), at)
            elif step == last:  # one more line of the step
                return
        self._steps.append((step, at))

    def resume(self, checkpoint: int, at: Position) -> None:
        """The lines from ``at`` on are a run's that resumed from the checkpoint of step ``checkpoint`` (a
        folder of its own): the counted lines of later steps are dropped."""
        self._cut(bisect.bisect_right(self._steps, checkpoint, key=lambda kept: kept[0]), at)

    def _cut(self, first: int, at: Position) -> None:
        if first < len(self._steps):
            self._spans.append((self._steps[first][1], at))
            del self._steps[first:]

    def replaced(self) -> Callable[[Position], bool]:
        """Whether the line at a position is one a resumed run replaced; asked of positions in log order."""
        merged: list[list[Position]] = []
        for start, end in sorted(self._spans):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        index = 0

        def inside(at: Position) -> bool:
            nonlocal index
            while index < len(merged) and merged[index][1] <= at:
                index += 1
            return index < len(merged) and merged[index][0] <= at

        return inside


def counted(
    lines: Callable[[], Iterable[tuple[Position, Any]]],
    step_of: Callable[[Any], int | None],
    one_per_step: bool = False,
    checkpoints: Iterable[tuple[int, int]] = (),
) -> Iterator[tuple[Position, Any]]:
    """The ``(position, value)`` of ``lines()`` that count, in log order; ``lines`` is called twice (once
    to find the restarts, keeping only steps, once to yield). A value whose ``step_of`` is ``None`` always
    counts. ``checkpoints``: ``(log, step)``, the log of the chain whose run resumed from the checkpoint of
    ``step`` (:func:`~swift_rlfactory.runs.resume.run_chain`)."""
    restarts = Restarts(one_per_step)
    resumed = dict(checkpoints)
    log = 0
    for at, value in lines():
        while log < at[0]:  # the first line of the next log of the chain
            log += 1
            if log in resumed:
                restarts.resume(resumed[log], (log, 0))
        step = step_of(value)
        if step is not None:
            restarts.add(step, at)
    replaced = restarts.replaced()
    for at, value in lines():
        if step_of(value) is None or not replaced(at):
            yield at, value


def log_lines(path: Path, skipped: list[tuple[int, str]] | None = None) -> Iterator[tuple[Position, Any]]:
    """``((0, line number), value)`` of each line of one log that is JSON (blank ones left out); a line that
    is not is added to ``skipped`` as ``(number, why)``, when given, else left out silently."""
    for number, raw in raw_lines(path):
        try:
            value = parse(raw)
        except NotJSON as exc:
            if skipped is not None:
                skipped.append((number, str(exc)))
            continue
        if value is not None:
            yield (0, number), value
