"""Training metrics about rewards (``rlfactory/*``, ``rewards/errors`` and its causes) of a batch of scored
trajectories, and a model judge's counters (``judge/*``); each is described in docs/rewards.md#reward-metrics.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..trajectory import Trajectory

_BY_CAUSE = {
    "timeout": "rewards/timeouts",
    "non_finite": "rewards/non_finite",
    "wrong_length": "rewards/wrong_length",
    "missing_field": "rewards/missing_field",
}


def reward_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """The reward metrics of one batch (empty for an empty batch)."""
    if not trajectories:
        return {}
    metrics: dict[str, float] = {}
    for name in sorted({k for t in trajectories for k in t.rewards if k != "total"}):
        metrics[f"rlfactory/{name}"] = sum(t.rewards.get(name, 0.0) for t in trajectories) / len(trajectories)
    for name in sorted({k for t in trajectories for k in t.turn_rewards}):
        turns = [v for t in trajectories for v in t.turn_rewards.get(name, [])]
        if turns:
            metrics[f"rlfactory/turn/{name}"] = sum(turns) / len(turns)
    causes = [error.partition(":")[0] for t in trajectories for error in t.reward_errors.values()]
    metrics["rewards/errors"] = float(len(causes))
    for cause, key in _BY_CAUSE.items():
        metrics[key] = float(causes.count(cause))
    return metrics


@dataclass
class JudgeStats:
    """A judge's counters since its last drain; counters of several judges or ranks :meth:`merge` into the
    counters of all of them, so rates are weighted by lookups and the median is of every latency."""

    lookups: int = 0
    hits: int = 0
    calls: int = 0
    errors: int = 0
    out_of_range: int = 0
    latencies: list[float] = field(default_factory=list)

    def merge(self, other: JudgeStats) -> JudgeStats:
        """The counters of both."""
        return JudgeStats(
            lookups=self.lookups + other.lookups,
            hits=self.hits + other.hits,
            calls=self.calls + other.calls,
            errors=self.errors + other.errors,
            out_of_range=self.out_of_range + other.out_of_range,
            latencies=[*self.latencies, *other.latencies],
        )

    def metrics(self) -> dict[str, float]:
        """``judge/*`` (empty when nothing was judged)."""
        if not self.lookups:
            return {}
        metrics = {
            "judge/calls": float(self.calls),
            "judge/cache_hit_rate": self.hits / self.lookups,
            "judge/errors": float(self.errors),
        }
        if self.out_of_range:  # a mis-scaled rubric or reply: shown once it happens
            metrics["judge/out_of_range"] = float(self.out_of_range)
        if self.latencies:
            metrics["judge/latency_p50_s"] = statistics.median(self.latencies)
        return metrics
