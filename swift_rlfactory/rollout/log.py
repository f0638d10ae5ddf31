"""The trajectory log: every finished trajectory as one JSON line, for inspection after a run.

Each line is :meth:`Trajectory.to_dict` plus ``step`` and ``time``, with every recorded secret in it
replaced (:func:`~swift_rlfactory.secrets.redact_data`: a tool's output or error may echo a credential
it was given). Nothing else is changed: a URL the model wrote or read is data, and ``rewards`` rescores it.
Lines are written with one ``write`` call on a file opened in append mode, so several processes (ranks of
a multi-GPU run) can share a file without interleaving inside a line.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

from .. import jsonl
from ..secrets import redact_data
from ..trajectory import Trajectory

logger = logging.getLogger(__name__)


class TrajectoryLog:
    """Appends trajectories to a JSONL file, creating its folder on first use."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def write(self, trajectories: Sequence[Trajectory], step: int | None = None) -> None:
        """Append one line per trajectory."""
        if not trajectories:
            return
        now = time.time()
        lines = "".join(
            json.dumps(
                redact_data({"step": step, "time": now, **t.to_dict()}),
                ensure_ascii=False,
                default=str,
            )
            + "\n"
            for t in trajectories
        )
        append_lines(self.path, lines)


def append_lines(path: Path, text: str) -> None:
    """Append ``text`` with one ``write`` on an ``O_APPEND`` file: writers never interleave inside it, and a
    crash tears at most the last line. A lone surrogate (half an emoji a model wrote, ``"\\ud800"`` in its
    JSON) is written as its ``\\ud800`` escape, which reads back as the same string inside JSON, instead of
    failing the write (and every later one of the same episode on resume)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, text.encode("utf-8", "backslashreplace"))
    finally:
        os.close(fd)


def read_trajectories(path: str | Path) -> list[dict]:
    """Every line of a trajectory log, parsed; a ``.gz`` log (as the GPU benchmarks return them) is
    decompressed (:func:`swift_rlfactory.jsonl.read_text`). A line that is not JSON (torn by a writer
    killed mid-line, then appended to by a resumed run) is skipped with one warning naming it."""
    path = Path(path)
    skipped: list[tuple[int, str]] = []
    found = [record for _, record in jsonl.records(path, skipped)]
    if skipped:
        logger.warning(
            "%s: skipped %d lines that are not JSON (torn by a writer killed mid-line?): %s",
            path, len(skipped), "; ".join(f"line {n}: {why}" for n, why in skipped[:3]),
        )  # fmt: skip
    return found
