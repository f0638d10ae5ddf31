"""Median step time per run from ms-swift logging.jsonl files, and the rlfactory/baseline ratio.

    python benchmarks/summarize_colocate.py benchmarks/results/h200-colocate/*.jsonl

File names are ``<scheduler>-<latency>.jsonl``, or ``<mode>-<scheduler>-<latency>.jsonl`` for the two-GPU
server-mode runs (``colocate_h200.sh ... server|server-async``). The first step (vLLM warm-up, compilation) is skipped.
**speed-up** is the baseline's median step over ``rlfactory``'s at the same latency and mode; **x 0 s** is a
run's median step over the same scheduler's at zero latency (the server-mode target: within 1.15x at 0.5 s).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def median_step(path: Path) -> tuple[float, int, dict[str, float]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    steps = [r for r in rows if "step_time" in r]
    times = [float(r["step_time"]) for r in steps[1:]] or [float(r["step_time"]) for r in steps]
    keys = ("reward", "tools/calls_per_trajectory", "tools/latency_p50_s", "turns")
    means = {
        k: statistics.mean(float(r[k]) for r in steps if k in r) for k in keys if any(k in r for r in steps)
    }
    return statistics.median(times), len(times), means


def main() -> None:
    results = {}
    for name in sys.argv[1:]:
        path = Path(name)
        sched, _, latency = path.stem.rpartition("-")
        results[(sched, latency)] = median_step(path)
    print("| latency s | scheduler | median step s | steps | tool calls / traj | reward | speed-up | x 0 s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    zero = {sched: result for (sched, latency), result in results.items() if float(latency) == 0}
    for (sched, latency), (median, n, means) in sorted(
        results.items(), key=lambda kv: (float(kv[0][1]), kv[0][0])
    ):
        base = results.get((sched.replace("rlfactory", "sync_tools"), latency))
        speedup = f"{base[0] / median:.2f}x" if base and "rlfactory" in sched else ""
        x_zero = f"{median / zero[sched][0]:.2f}" if sched in zero and float(latency) != 0 else ""
        calls = means.get("tools/calls_per_trajectory", float("nan"))
        print(
            f"| {latency} | {sched} | {median:.2f} | {n} | {calls:.2f} | {means.get('reward', float('nan')):.3f} "
            f"| {speedup} | {x_zero} |"
        )


if __name__ == "__main__":
    main()
