"""Median step time per run from ms-swift logging.jsonl files, and the rlfactory/baseline ratio.

    python benchmarks/summarize_colocate.py OUT/*.jsonl

File names are ``<scheduler>-<latency>.jsonl``, or ``<mode>-<scheduler>-<latency>.jsonl`` for the server-mode
runs (``colocate_h200.sh ... server|server-async``). The first step (vLLM warm-up, compilation) is skipped.

* **speed-up**: the baseline's median step over ``rlfactory``'s at the same latency and mode;
* **x 0 s**: a run's median step over the same scheduler's at zero latency (the server-mode target: within
  1.15x at 0.5 s);
* **chain floor x 0 s**: what x 0 s cannot go below. A trajectory's tool turns run one after another, so a
  step takes at least the zero-latency median plus latency x ``tools/max_tool_turns``, the longest chain of
  tool turns in that step (logged by the ``rlfactory`` callback; blank for runs logged before it was).
  The column is the median of that floor over the steps, divided by the zero-latency median.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any


def load_steps(path: Path) -> list[dict[str, Any]]:
    """Every logged training step of a run."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if "step_time" in r]


def timed(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps whose time counts: all after the first (or the only one)."""
    return steps[1:] or steps


def summary(steps: list[dict[str, Any]]) -> tuple[float, dict[str, float]]:
    """Median time of the timed steps and the mean over all steps of the tool and reward metrics."""
    keys = ("reward", "tools/calls_per_trajectory", "tools/latency_p50_s", "turns")
    means = {
        k: statistics.mean(float(r[k]) for r in steps if k in r) for k in keys if any(k in r for r in steps)
    }
    return statistics.median(float(r["step_time"]) for r in timed(steps)), means


def chain_floor(steps: list[dict[str, Any]], zero_median: float, latency: float) -> float | None:
    """Median over the timed steps of the zero-latency median plus latency x the step's longest tool-turn chain."""
    if not all("tools/max_tool_turns" in r for r in timed(steps)):
        return None
    return statistics.median(zero_median + latency * float(r["tools/max_tool_turns"]) for r in timed(steps))


def main() -> None:
    runs = {}
    for name in sys.argv[1:]:
        path = Path(name)
        sched, _, latency = path.stem.rpartition("-")
        runs[(sched, latency)] = load_steps(path)
    results = {key: summary(steps) for key, steps in runs.items()}
    print(
        "| latency s | scheduler | median step s | steps | tool calls / traj | reward | speed-up | x 0 s "
        "| chain floor x 0 s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    zero = {sched: result[0] for (sched, latency), result in results.items() if float(latency) == 0}
    for (sched, latency), (median, means) in sorted(
        results.items(), key=lambda kv: (float(kv[0][1]), kv[0][0])
    ):
        base = results.get((sched.replace("rlfactory", "sync_tools"), latency))
        speedup = f"{base[0] / median:.2f}x" if base and "rlfactory" in sched else ""
        x_zero = floor = ""
        if sched in zero and float(latency) != 0:
            x_zero = f"{median / zero[sched]:.2f}"
            bound = chain_floor(runs[(sched, latency)], zero[sched], float(latency))
            floor = f"{bound / zero[sched]:.2f}" if bound is not None else ""
        calls = means.get("tools/calls_per_trajectory", float("nan"))
        print(
            f"| {latency} | {sched} | {median:.2f} | {len(timed(runs[(sched, latency)]))} | {calls:.2f} "
            f"| {means.get('reward', float('nan')):.3f} | {speedup} | {x_zero} | {floor} |"
        )


if __name__ == "__main__":
    main()
