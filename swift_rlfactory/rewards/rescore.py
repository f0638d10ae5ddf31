"""Re-score recorded trajectories with an environment's reward spec: try a reward before training on it.

Reads a training or ``eval`` ``trajectories.jsonl`` (or its folder) and scores it in one batch for the CLI
(``swift-rlfactory rewards``) and the web UI; the reading rules are in docs/rewards.md
("Re-scoring recorded trajectories").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from swift_rlfactory.data import jsonl
from swift_rlfactory.runs.folder import TRAJECTORIES, resolve_run
from swift_rlfactory.runs.resume import latest_lines, run_chain, trajectory_step
from swift_rlfactory.runtime import blocking

from ..trajectory import Trajectory
from .registry import RewardSpec

logger = logging.getLogger(__name__)


class TrajectoryFileError(ValueError):
    """A trajectories file that cannot be read; the message names the file and, where it applies, the line."""


@dataclass
class Recorded:
    """One trajectory read back from a log, with where it came from and what it scored then."""

    line: int
    trajectory: Trajectory
    recorded_total: float | None = None
    file: str = ""  # the log the line is of: a resumed run's chain is read from several
    step: int | None = None  # the training step it fed; None for an eval line


@dataclass
class RescoredRow:
    """The new scores of one recorded trajectory (the fields the reward registry fills)."""

    line: int
    rewards: dict[str, float]
    turn_rewards: dict[str, list[float]] = field(default_factory=dict)
    reward_errors: dict[str, str] = field(default_factory=dict)
    recorded_total: float | None = None
    question: str = ""
    file: str = ""  # as Recorded.file


@dataclass
class Rescored:
    """Every row's scores plus ``summary``: each component's and the total's mean over rows, and each
    per-turn component's mean over all turns (``turn/<name>``)."""

    file: str
    components: list[str]
    rows: list[RescoredRow]
    summary: dict[str, float]
    errors: int

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (what ``--json`` prints)."""
        return asdict(self)


def trajectories_file(path: str | Path) -> Path:
    """The log that ``path`` names: the file itself, or a folder's ``trajectories.jsonl``, or that of the
    newest run (``v<N>-<timestamp>``) in an ``--output_dir`` of ms-swift's (:func:`~swift_rlfactory.runs.folder.
    resolve_run`). A folder with none raises :class:`TrajectoryFileError`."""
    path = Path(path).expanduser()
    if not path.is_dir():
        return path
    run = resolve_run(path, [TRAJECTORIES])
    if not (run / TRAJECTORIES).is_file():
        raise TrajectoryFileError(f"{path}: a folder without {TRAJECTORIES}, nor a run folder holding one")
    return run / TRAJECTORIES


def load_run(path: str | Path, limit: int | None = None) -> list[Recorded]:
    """:func:`load_recorded` of ``path``, and, when ``path`` is a folder whose run resumed from another
    run's checkpoint (a folder of its own, :func:`~swift_rlfactory.runs.resume.run_chain`), the whole run as
    the web UI shows it: each earlier run's lines up to the checkpoint the next one resumed from, then
    this run's. The first ``limit`` of them; each names its file (:attr:`Recorded.file`)."""
    log = trajectories_file(path)
    chain = run_chain(log.parent) if Path(path).expanduser().is_dir() else []
    out: list[Recorded] = []
    for folder, checkpoint in chain:
        if (folder / TRAJECTORIES).is_file():
            earlier = load_recorded(folder / TRAJECTORIES)
            out += [r for r in earlier if r.step is None or r.step <= checkpoint]
    out += load_recorded(log)
    return out[:limit]


def load_recorded(path: str | Path, limit: int | None = None) -> list[Recorded]:
    """Read a trajectories log (or a folder holding one): the first ``limit`` lines that count, lines of
    steps a resumed run logged again left out, failed ``eval`` episodes and a torn last line skipped;
    raises :class:`TrajectoryFileError` naming the line for anything else that is not a trajectory.
    """
    path = trajectories_file(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TrajectoryFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TrajectoryFileError(f"{path}: cannot be read: {exc}") from None
    parsed: list[tuple[int, Any]] = []
    lines = jsonl.lines(text)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            where = f"{path}:{number}"
            if number == len(lines) and not text.endswith("\n"):
                logger.warning("%s is unfinished (a run stopped while writing it): not scored", where)
                break
            raise TrajectoryFileError(
                f"{where}: not JSON ({exc.msg}); expected one trajectory per line"
            ) from None
        if isinstance(data, dict) and data.get("failed") is True:
            continue
        parsed.append((number, data))
    # the whole file first: a resumed run's lines at its end replace earlier ones
    counted = latest_lines(
        parsed, lambda item: trajectory_step(item[1]) if isinstance(item[1], dict) else None
    )
    out = [
        replace(_recorded(data, number, f"{path}:{number}"), file=str(path), step=trajectory_step(data))
        for number, data in counted[:limit]
    ]
    if not out:
        raise TrajectoryFileError(f"{path}: no trajectories in the file")
    return out


def _recorded(data: Any, number: int, where: str) -> Recorded:
    if not isinstance(data, dict):
        raise TrajectoryFileError(
            f"{where}: expected a JSON object (one trajectory), got {type(data).__name__}"
        )
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise TrajectoryFileError(f"{where}: 'messages' must be a list of {{role, content}} objects")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise TrajectoryFileError(f"{where}: messages[{i}] must be an object with a 'role'")
        if not isinstance(message.get("content") or "", str):
            raise TrajectoryFileError(f"{where}: messages[{i}].content must be text")
    for name, kind in (("tool_calls", list), ("row", dict), ("rewards", dict)):
        if name in data and not isinstance(data[name], kind):
            raise TrajectoryFileError(f"{where}: '{name}' must be a {'list' if kind is list else 'object'}")
    if not all(isinstance(c, dict) for c in data.get("tool_calls", [])):
        raise TrajectoryFileError(f"{where}: every entry of 'tool_calls' must be an object")
    turns = data.get("turns", 0)
    if not isinstance(turns, int) or isinstance(turns, bool) or turns < 0:  # null: every reward raised
        raise TrajectoryFileError(f"{where}: 'turns' must be a whole number (the assistant turns generated)")
    recorded_total = (data.get("rewards") or {}).get("total")
    trajectory = Trajectory.from_dict({**data, "rewards": {}, "turn_rewards": {}, "reward_errors": {}})
    total = float(recorded_total) if isinstance(recorded_total, int | float) else None
    return Recorded(number, trajectory, total)


async def arescore(recorded: Sequence[Recorded], spec: RewardSpec, file: str = "") -> Rescored:
    """Score ``recorded`` with ``spec`` in one batch and summarise."""
    trajectories = [r.trajectory for r in recorded]
    errors_before = spec.errors
    await spec.ascore(trajectories)
    rows = [
        RescoredRow(
            line=r.line,
            rewards=dict(r.trajectory.rewards),
            turn_rewards=dict(r.trajectory.turn_rewards),
            reward_errors=dict(r.trajectory.reward_errors),
            recorded_total=r.recorded_total,
            question=_question(r.trajectory),
            file=r.file,
        )
        for r in recorded
    ]
    summary: dict[str, float] = {}
    for name in [*spec.names, "total"]:
        summary[name] = sum(row.rewards.get(name, 0.0) for row in rows) / len(rows)
    for name in sorted({k for row in rows for k in row.turn_rewards}):
        turns = [v for row in rows for v in row.turn_rewards.get(name, [])]
        if turns:
            summary[f"turn/{name}"] = sum(turns) / len(turns)
    summary.update(spec.drain_metrics())
    return Rescored(file, spec.names, rows, summary, spec.errors - errors_before)


def rescore(recorded: Sequence[Recorded], spec: RewardSpec, file: str = "") -> Rescored:
    """Synchronous :func:`arescore`, in a notebook cell too (:mod:`swift_rlfactory.runtime.blocking`)."""
    return blocking.run(arescore(recorded, spec, file))


def _question(trajectory: Trajectory) -> str:
    for message in trajectory.messages:
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""
