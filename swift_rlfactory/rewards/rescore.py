"""Re-score recorded trajectories with an environment's reward spec: try a reward before training on it.

Reads a training or ``eval`` ``trajectories.jsonl`` (or its folder) and scores it in one batch for the CLI
(``swift-rlfactory rewards``) and the web UI; the reading rules are in docs/rewards.md
("Re-scoring recorded trajectories").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any

from swift_rlfactory.runs import stream
from swift_rlfactory.runs.folder import TRAJECTORIES, resolve_run
from swift_rlfactory.runs.resume import run_chain, trajectory_step
from swift_rlfactory.runtime import blocking

from ..trajectory import Trajectory
from . import judge_text
from .registry import RewardSpec

logger = logging.getLogger(__name__)

BATCH = 256  # trajectories scored at once by the CLI (:func:`batches`): memory holds a batch, not the log


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


def iter_run(path: str | Path) -> Iterator[Recorded]:
    """:func:`iter_recorded` of ``path``, and, when ``path`` is a folder whose run resumed from another
    run's checkpoint (a folder of its own, :func:`~swift_rlfactory.runs.resume.run_chain`), the whole run as
    the web UI shows it: each earlier run's lines up to the checkpoint the next one resumed from, then
    this run's. Each names its file (:attr:`Recorded.file`); read line by line."""
    for log, checkpoint in earlier_logs(path):
        earlier = iter_recorded(log)
        yield from (r for r in earlier if r.step is None or r.step <= checkpoint)
    yield from iter_recorded(trajectories_file(path))


def earlier_logs(path: str | Path) -> list[tuple[Path, int]]:
    """The logs of the runs that the run ``path`` names continues (when ``path`` is a folder), oldest first,
    each with the step of the checkpoint the run after it resumed from (:func:`iter_run`)."""
    if not Path(path).expanduser().is_dir():
        return []
    chain = run_chain(trajectories_file(path).parent)
    return [(folder / TRAJECTORIES, step) for folder, step in chain if (folder / TRAJECTORIES).is_file()]


def load_recorded(path: str | Path, limit: int | None = None) -> list[Recorded]:
    """The first ``limit`` of :func:`iter_recorded`, as a list."""
    return list(islice(iter_recorded(path), limit))


def iter_recorded(path: str | Path) -> Iterator[Recorded]:
    """Read a trajectories log (or a folder holding one) line by line, compressed or not: the lines that
    count, lines of steps a resumed run logged again left out (:mod:`swift_rlfactory.runs.stream`: the
    whole file is checked before the first is given, so a line further down that is not JSON stops the
    read before anything is scored), failed ``eval`` episodes and a torn last line skipped; raises
    :class:`TrajectoryFileError` naming the line for anything else that is not a trajectory.
    """
    path = trajectories_file(path)
    passes = 0

    def lines() -> Iterator[tuple[stream.Position, Any]]:
        nonlocal passes
        passes += 1
        return _lines(path, warn=passes == 2)

    found = False
    for (_, number), data in stream.counted(lines, _step_of):
        yield replace(_recorded(data, number, f"{path}:{number}"), file=str(path), step=trajectory_step(data))
        found = True
    if not found:
        raise TrajectoryFileError(f"{path}: no trajectories in the file")


def _lines(path: Path, warn: bool) -> Iterator[tuple[stream.Position, Any]]:
    try:
        for number, raw in stream.raw_lines(path):
            try:
                data = stream.parse(raw)
            except stream.NotJSON as exc:
                if not raw.endswith(b"\n"):  # the last line, unfinished
                    if warn:
                        logger.warning(
                            "%s:%d is unfinished (a run stopped while writing it): not scored", path, number
                        )
                    return
                raise TrajectoryFileError(
                    f"{path}:{number}: not JSON ({exc.reason}); expected one trajectory per line"
                ) from None
            if data is not None and not (isinstance(data, dict) and data.get("failed") is True):
                yield (0, number), data
    except FileNotFoundError:
        raise TrajectoryFileError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:
        if isinstance(exc, TrajectoryFileError):
            raise
        raise TrajectoryFileError(f"{path}: cannot be read: {exc}") from None


def _step_of(data: Any) -> int | None:
    return trajectory_step(data) if isinstance(data, dict) else None


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


class Tally:
    """The summary of rows scored batch by batch: each component's and the total's mean over rows, each
    per-turn component's mean over all turns, added up as the rows come (the rows themselves are not kept)."""

    def __init__(self, components: Sequence[str]):
        self.sums = dict.fromkeys([*components, "total"], 0.0)
        self.turns: dict[str, list[float]] = {}  # per-turn component -> [sum, count]
        self.rows = 0

    def add(self, rows: Sequence[RescoredRow]) -> None:
        """Count ``rows``."""
        for row in rows:
            self.rows += 1
            for name in self.sums:
                self.sums[name] += row.rewards.get(name, 0.0)
            for name, values in row.turn_rewards.items():
                tally = self.turns.setdefault(name, [0.0, 0])
                for value in values:
                    tally[0] += value
                    tally[1] += 1

    def summary(self) -> dict[str, float]:
        """The means so far."""
        out = {name: total / self.rows for name, total in self.sums.items()}
        out.update({f"turn/{name}": s / n for name, (s, n) in sorted(self.turns.items()) if n})
        return out


async def ascore_rows(recorded: Sequence[Recorded], spec: RewardSpec) -> list[RescoredRow]:
    """Score one batch of ``recorded`` with ``spec``: their rows."""
    await spec.ascore([r.trajectory for r in recorded])
    return [
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


def batches(recorded: Iterable[Recorded], size: int = BATCH) -> Iterator[list[Recorded]]:
    """``recorded`` in batches of about ``size``, cut only between two training steps, or, in an eval log
    (no steps), between two questions: a GRPO group (one prompt of one step) is scored in one batch, as a
    group judge needs it. A batch holds at most ``size`` lines or one step's, whichever is more."""
    batch: list[Recorded] = []
    for r in recorded:
        if len(batch) >= size and _group(r) != _group(batch[-1]):
            yield batch
            batch = []
        batch.append(r)
    if batch:
        yield batch


def _group(r: Recorded) -> tuple[str, Any]:
    return (r.file, r.step) if r.step is not None else (r.file, judge_text.group_key(r.trajectory))


async def arescore(recorded: Sequence[Recorded], spec: RewardSpec, file: str = "") -> Rescored:
    """Score ``recorded`` with ``spec`` in one batch and summarise."""
    errors_before = spec.errors
    rows = await ascore_rows(recorded, spec)
    tally = Tally(spec.names)
    tally.add(rows)
    summary = {**tally.summary(), **spec.drain_metrics()}
    return Rescored(file, spec.names, rows, summary, spec.errors - errors_before)


def rescore(recorded: Sequence[Recorded], spec: RewardSpec, file: str = "") -> Rescored:
    """Synchronous :func:`arescore`, in a notebook cell too (:mod:`swift_rlfactory.runtime.blocking`)."""
    return blocking.run(arescore(recorded, spec, file))


def _question(trajectory: Trajectory) -> str:
    for message in trajectory.messages:
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""
