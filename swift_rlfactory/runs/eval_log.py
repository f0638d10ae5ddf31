"""An eval's ``trajectories.jsonl``: its records, written one line per episode and read back to resume.

The record format and the resume rule are in ``docs/run-folder.md``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from swift_rlfactory import redaction
from swift_rlfactory.data import jsonl
from swift_rlfactory.runs import stream
from swift_rlfactory.runs.folder import TRAJECTORIES
from swift_rlfactory.runs.log import append_lines
from swift_rlfactory.trajectory import Trajectory

logger = logging.getLogger(__name__)


class EvalLog:
    """``trajectories.jsonl`` of an evaluation: one line per (question index, sample), in finishing order;
    the last line of an ``(index, sample)`` counts. Its records: ``docs/run-folder.md``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @classmethod
    def in_folder(cls, folder: str | Path) -> EvalLog:
        """The log of the eval whose output folder is ``folder``."""
        return cls(Path(folder) / TRAJECTORIES)

    def load(
        self, repair: bool = True, keep: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    ) -> dict[tuple[int, int], dict[str, Any]]:
        """Each episode's latest record by ``(index, sample)``, read line by line; ``keep``: what of a record
        to hold (the fields a caller needs: a resume needs no conversations), so memory holds that much per
        episode, never the log. A last line torn by a crash is cut off (and so re-run) when ``repair``, which
        only the eval that holds the folder's lock may do; a reader (``select``) skips it, since it may be a
        line another run is writing. A line further up that is no record (a writer killed mid-line before
        another appended) is skipped with one warning, never the end of a resume: its episode is not done,
        so it runs again."""
        if not self.path.exists():
            return {}
        done: dict[tuple[int, int], dict[str, Any]] = {}
        skipped: list[tuple[int, str]] = []
        whole = 0  # bytes of the lines read whole
        lines = stream.raw_lines(self.path)
        for number, raw in lines:
            if not raw.endswith(b"\n"):  # the last line, unfinished
                lines.close()
                if repair:
                    logger.warning("%s: dropping an unfinished last line (it will be re-run)", self.path)
                    with open(self.path, "r+b") as f:
                        f.truncate(whole)
                break
            whole += len(raw)
            text = jsonl.decode_line(raw, self.path, number)  # a file in another encoding stops the resume
            try:
                record = stream.parse(text)
                if record is not None:
                    done[episode_key(record)] = keep(record) if keep else record
            except stream.NotJSON as exc:
                skipped.append((number, str(exc)))
            except (ValueError, KeyError, TypeError) as exc:
                skipped.append((number, f"not an evaluation record ({type(exc).__name__}: {exc})"))
        if skipped:
            logger.warning(
                "%s: skipped %d lines that are not evaluation records (torn by a writer killed mid-line, or "
                "joined from elsewhere), whose episodes run again: %s",
                self.path, len(skipped), "; ".join(f"line {n}: {why}" for n, why in sorted(skipped)[:3]),
            )  # fmt: skip
        return done

    def append(self, record: dict[str, Any]) -> None:
        """Append one record as one line (one ``write``, so a crash tears at most the last line).

        Recorded secrets are replaced everywhere but in ``question`` and ``row``, the dataset's own text,
        which resume compares as it is (:func:`current_records`): a tool that echoes the key it was given
        shows it in the trajectory, as in training's log.
        """
        kept = {"question", "row"}
        record = {k: v if k in kept else redaction.redact_data(v) for k, v in record.items()}
        append_lines(self.path, json.dumps(record, ensure_ascii=False, default=str) + "\n")


def episode_key(record: dict[str, Any]) -> tuple[int, int]:
    """The ``(question index, sample)`` episode a log record is of: of several lines with one key, the last
    is the one that counts (:meth:`EvalLog.load`, and the viewer's index). Raises ``KeyError``,
    ``ValueError`` or ``TypeError`` for a record without them."""
    return int(record["index"]), int(record["sample"])


def is_failed(record: dict[str, Any]) -> bool:
    """Whether a log record is an episode that failed on every attempt: an error, no trajectory, no score."""
    return record.get("failed") is True


def trajectory_from_record(record: dict[str, Any]) -> Trajectory:
    """The :class:`Trajectory` stored in a log line."""
    return Trajectory(**{f.name: record[f.name] for f in fields(Trajectory) if f.name in record})
