"""Training metrics about tool use, computed from a batch of finished trajectories.

Logged next to ms-swift's own ``reward`` and ``num_turns`` so a run shows whether the model is learning
to use its tools (calls per trajectory), using them well (error rate) and what they cost (latency, cache).

``tools/max_tool_turns`` is the most turns with tool calls that any one trajectory of the batch took. Calls
of one turn run together, but a trajectory's next turn waits for this turn's results, so that many tool
latencies add up in sequence however the scheduler overlaps the rest: a floor under the rollout's time
(``benchmarks/summarize_colocate.py`` reports it). ms-swift averages it over the reward batches of a log step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..trajectory import Trajectory


def tool_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Batch metrics: ``tools/calls_per_trajectory``, ``tools/max_tool_turns``, ``tools/error_rate``,
    ``tools/latency_p50_s``, ``tools/latency_p95_s``, ``tools/cache_hit_rate``, ``turns`` and the share of
    each stop reason.

    Rates over calls are omitted when the batch made no calls, rather than reported as zero.
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
