"""The training metrics of one batch over every rank: what each rank contributes, and the pure reductions.

Each rank scores its own slice of a batch; the metrics describe the whole batch. How each kind of metric is
reduced (and why samples, not sketches, are gathered): docs/scaling.md#metrics-over-ranks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..rewards.metrics import JudgeStats, reward_metrics
from ..trajectory import Trajectory
from .metrics import tool_metrics, user_metrics

TOOL_CHAIN = "timeline/tool_chain_s"  # the longest chain of one trajectory: the max over ranks
_SHARE = "timeline/share/"


@dataclass
class RankBatch:
    """One rank's part of a batch: its trajectories (:func:`slim`: only what the metrics read), counters
    summed over ranks (``log/write_errors``, ``tools/cache_errors``), its judges' counters, and the
    metrics of other stateful reward components (averaged over the ranks that report them)."""

    trajectories: list[Trajectory]
    counts: dict[str, float] = field(default_factory=dict)
    judge: JudgeStats = field(default_factory=JudgeStats)
    other: dict[str, float] = field(default_factory=dict)


def slim(trajectory: Trajectory) -> Trajectory:
    """The trajectory as the metrics read it: no messages, no row, a call's error as a flag and a reward
    error as its cause, so a rank's part stays small however long its conversations are."""
    calls = [
        {
            "turn": c.get("turn"),
            "latency_s": c.get("latency_s", 0.0),
            "error": bool(c.get("error")),
            "cache_hit": bool(c.get("cache_hit")),
        }
        for c in trajectory.tool_calls
    ]
    return Trajectory(
        messages=[],
        tool_calls=calls,
        turns=trajectory.turns,
        stop_reason=trajectory.stop_reason,
        rewards=dict(trajectory.rewards),
        turn_rewards={k: list(v) for k, v in trajectory.turn_rewards.items()},
        reward_errors={k: v.partition(":")[0] for k, v in trajectory.reward_errors.items()},
        user_calls=[{**r, "error": bool(r.get("error"))} for r in trajectory.user_calls],
    )


def batch_metrics(parts: Sequence[RankBatch]) -> dict[str, float]:
    """The metrics of the whole batch: ``tools/*``, ``user/*``, ``turns``, ``stop/*``, ``rlfactory/*`` and ``rewards/*``
    of every rank's trajectories together (so means are weighted by trajectories or calls, percentiles are
    of every call), counters summed, ``judge/*`` of the merged counters, other metrics averaged."""
    trajectories = [t for part in parts for t in part.trajectories]
    metrics = tool_metrics(trajectories)
    metrics.update(user_metrics(trajectories))
    metrics.update(reward_metrics(trajectories))
    metrics.update(_mean_of(p.other for p in parts))
    for part in parts:
        for key, value in part.counts.items():
            metrics[key] = metrics.get(key, 0.0) + value
    judged = JudgeStats()
    for part in parts:
        judged = judged.merge(part.judge)
    metrics.update(judged.metrics())
    return metrics


def timeline_metrics(per_rank: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """One step's ``timeline/*`` over ranks: each phase's seconds averaged over ranks (every rank runs every
    phase of the step), the longest tool chain the longest of any rank, the shares recomputed from the
    averaged seconds."""
    reported = [m for m in per_rank if m]
    if not reported:
        return {}
    metrics = _mean_of(reported)
    if any(TOOL_CHAIN in m for m in reported):
        metrics[TOOL_CHAIN] = max(m.get(TOOL_CHAIN, 0.0) for m in reported)
    step = metrics.get("timeline/step_s", 0.0)
    for key in [k for k in metrics if k.startswith(_SHARE)]:
        seconds = metrics.get(f"timeline/{key.removeprefix(_SHARE)}_s", 0.0)
        metrics[key] = seconds / step if step > 0 else 0.0
    return metrics


def _mean_of(dicts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Each key's mean over the dicts that have it."""
    values: dict[str, list[float]] = {}
    for d in dicts:
        for key, value in d.items():
            values.setdefault(key, []).append(value)
    return {k: sum(v) / len(v) for k, v in values.items()}
