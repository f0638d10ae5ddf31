"""Training metrics about rewards (``rlfactory/*``, ``rewards/errors`` and its causes) of a batch of scored
trajectories; each is described in docs/rewards.md#reward-metrics.
"""

from __future__ import annotations

from collections.abc import Sequence

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
