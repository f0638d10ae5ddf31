"""The run folder's layout: the names of the files a run or an eval writes, and where to find a run.

The format of each file, and how the folders nest, is in ``docs/run-folder.md``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TRAJECTORIES = "trajectories.jsonl"  # one line per finished trajectory (training) or episode (eval)
LOGGING = "logging.jsonl"  # ms-swift's: one line of averaged metrics per logged step
METRICS = "metrics.json"  # an eval's aggregate metrics
EVAL_CONFIG = "eval_config.json"  # the settings an eval's results were scored with
ARGS = "args.json"  # ms-swift's: the run's arguments (``resume_from_checkpoint`` among them)
COMMAND = "command.sh"  # ``train``'s exact ``swift rlhf`` command
SWIFT_LOG = "swift.log"  # ``train``'s copy of ms-swift's console output
TRAINING_DATA = "train.jsonl"  # ``train``'s generated dataset
CHECKPOINT = "checkpoint-"  # ms-swift's checkpoint folders: ``checkpoint-<step>``
ADAPTER_WEIGHTS = "adapter_model.safetensors"  # a LoRA checkpoint's weights


def new_run_dir(parent: Path, create: bool = True) -> Path:
    """A run folder of its own under ``parent``: ``<timestamp>``, or ``<timestamp>-2``, ``-3``... when a
    run started in the same second took it; created at once (``create``) so no other run can take it."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 10_000):
        candidate = parent / (stamp if n == 1 else f"{stamp}-{n}")
        if not create:
            if not candidate.exists():
                return candidate
            continue
        try:
            parent.mkdir(parents=True, exist_ok=True)
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise FileExistsError(f"no free run folder name under {parent}")


def resolve_run(folder: str | Path, logs: Sequence[str] = (TRAJECTORIES, LOGGING)) -> Path:
    """The folder that holds a run's ``logs`` (any of them): ``folder`` itself, or its newest subfolder
    (by modification time) that has one; ``folder`` when none does."""
    folder = Path(folder).expanduser()
    if any((folder / name).exists() for name in logs):
        return folder
    candidates = [p for p in folder.glob("*/") if any((p / name).exists() for name in logs)]
    if candidates:
        return max(candidates, key=lambda p: p.stat().st_mtime)
    return folder


def checkpoint_step(checkpoint: str | Path) -> int | None:
    """The step of a ``checkpoint-<step>`` folder, ``None`` for a name that holds none."""
    step = Path(checkpoint).name.removeprefix(CHECKPOINT)
    return int(step) if step.isdigit() else None


def last_checkpoint(run_dir: Path) -> Path | None:
    """The run's latest LoRA checkpoint folder, by step number (``checkpoint-100`` after ``checkpoint-80``)."""
    steps: dict[int, Path] = {}
    for adapter in Path(run_dir).glob(f"{CHECKPOINT}*/{ADAPTER_WEIGHTS}"):
        step = checkpoint_step(adapter.parent)
        if step is not None:
            steps[step] = adapter.parent
    return steps[max(steps)] if steps else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """``data`` as indented JSON at ``path``, written beside it and moved into place: a run killed while
    writing leaves the file as it was, never half a JSON document every later resume would stop at."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    os.replace(partial, path)


def read_summary(folder: str | Path) -> dict[str, Any] | None:
    """An eval folder's ``metrics.json``; ``None`` when there is none (yet) or it is being written."""
    try:
        summary = json.loads((Path(folder) / METRICS).read_text())
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None
