"""Training metrics about tool use (calls, errors, latency, cache, turns, stop reasons) and a simulated
user's replies of a batch of finished trajectories; each metric is described in
docs/environments.md#tool-metrics-of-a-batch and docs/environments.md#simulated-users.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..trajectory import Trajectory


def tool_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Batch metrics ``tools/*``, ``turns`` and ``stop/<reason>``; rates over calls are omitted when the batch
    made no calls, rather than reported as zero.
    """
    if not trajectories:
        return {}
    calls = [c for t in trajectories for c in t.tool_calls]
    metrics = {
        "tools/calls_per_trajectory": len(calls) / len(trajectories),
        "tools/max_tool_turns": float(max(len({c.get("turn") for c in t.tool_calls}) for t in trajectories)),
        "turns": float(np.mean([t.turns for t in trajectories])),
    }
    for reason in sorted({t.stop_reason for t in trajectories if t.stop_reason}):
        metrics[f"stop/{reason}"] = sum(t.stop_reason == reason for t in trajectories) / len(trajectories)
    if calls:
        latencies = np.array([c.get("latency_s", 0.0) for c in calls])
        metrics["tools/error_rate"] = sum(1 for c in calls if c.get("error")) / len(calls)
        metrics["tools/latency_p50_s"] = float(np.percentile(latencies, 50))
        metrics["tools/latency_p95_s"] = float(np.percentile(latencies, 95))
        metrics["tools/cache_hit_rate"] = sum(1 for c in calls if c.get("cache_hit")) / len(calls)
    return metrics


def user_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Batch metrics ``user/*`` of the replies asked of a simulated user; empty when no trajectory of the
    batch asked one."""
    replies = [r for t in trajectories for r in t.user_calls]
    if not replies:
        return {}
    answered = [r.get("latency_s", 0.0) for r in replies if not r.get("error") and not r.get("cache_hit")]
    metrics = {
        "user/calls": float(len(replies)),
        "user/errors": float(sum(1 for r in replies if r.get("error"))),
        "user/timeouts": float(sum(1 for r in replies if r.get("timed_out"))),
        "user/cache_hit_rate": sum(1 for r in replies if r.get("cache_hit")) / len(replies),
        "user/echoes": float(sum(r.get("echoes", 0) for r in replies)),
        "user/turns_per_trajectory": sum(1 for r in replies if not r.get("error")) / len(trajectories),
    }
    if answered:
        metrics["user/latency_p50_s"] = float(np.percentile(answered, 50))
        metrics["user/latency_p95_s"] = float(np.percentile(answered, 95))
    return metrics
