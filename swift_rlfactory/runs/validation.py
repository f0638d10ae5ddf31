"""A training run's validation log: ``validation.jsonl``, one record per scored checkpoint (step 0 first).

``swift-rlfactory train --val-file`` writes it (:mod:`swift_rlfactory.validation`); the web UI's live
metrics draw its ``val/...`` keys. Record format: docs/run-folder.md; how it is made: docs/run.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from swift_rlfactory.data import jsonl

from .log import append_lines

VALIDATION = "validation.jsonl"  # one record per checkpoint scored beside training
VALIDATION_DIR = "validation"  # the eval folder of each: validation/step-0/, validation/checkpoint-<step>/
VALIDATION_SUMMARY = "validation.json"  # at the end: the checkpoint chosen on the worst shift, the alarms
STOP_FILE = "STOP"  # written into the run folder to ask the trainer to stop after its current step
STOP_FILE_VAR = "RLFACTORY_STOP_FILE"  # tells the trainer's callback where to look for it
SCORE, WORST, SHIFT = "val/score", "val/worst_shift", "val/shift/"  # the metric keys of a record


def append_record(run_dir: Path, record: dict[str, Any]) -> None:
    """Add one checkpoint's record to the run's ``validation.jsonl``."""
    append_lines(Path(run_dir) / VALIDATION, json.dumps(record, ensure_ascii=False) + "\n")


def read_records(run_dir: str | Path) -> list[dict[str, Any]]:
    """The run's validation records in the order written (none when it ran without validation)."""
    path = Path(run_dir) / VALIDATION
    if not path.is_file():
        return []
    return [record for _, record in jsonl.records(path, []) if isinstance(record, dict)]


def metric_points(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Long-form points ``{"step", "metric", "value"}`` of the records' ``val/...`` numbers."""
    return [
        {"step": record["step"], "metric": key, "value": float(value)}
        for record in records
        if isinstance(record.get("step"), int)
        for key, value in record.items()
        if key.startswith("val/") and isinstance(value, int | float) and not isinstance(value, bool)
    ]


def alarm_lines(records: list[dict[str, Any]]) -> list[str]:
    """Each recorded alarm as one line naming its step."""
    return [
        f"step {r.get('step')}: {alarm.get('text', '')}" for r in records for alarm in r.get("alarms") or []
    ]
