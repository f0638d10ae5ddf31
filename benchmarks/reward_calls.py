"""What does running a user reward off the trainer's event loop cost per call?

A well-behaved async reward (``async def``, returns at once, or after ``await asyncio.sleep(0.01)``) and a
sync one are scored through the real registry, in batches as a GRPO step sends them. The figure is wall
time per call, best of ``--repeats`` batches, so it is the dispatch overhead and not the reward's own work.
Run it against another checkout to compare (``PYTHONPATH=/path/to/other python3 benchmarks/reward_calls.py``).

    python3 benchmarks/reward_calls.py --batch 256 --repeats 20
"""

from __future__ import annotations

import argparse
import asyncio
import time

from swift_rlfactory.rewards.registry import RewardSpec, register_reward
from swift_rlfactory.rewards.terms import RewardTerm
from swift_rlfactory.trajectory import Trajectory


@register_reward("bench_async_instant")
async def instant(trajectory: Trajectory) -> float:
    return 1.0


@register_reward("bench_async_sleep")
async def sleeps(trajectory: Trajectory) -> float:
    await asyncio.sleep(0.01)
    return 1.0


@register_reward("bench_sync_instant")
def sync_instant(trajectory: Trajectory) -> float:
    return 1.0


def per_call_us(name: str, batch: int, repeats: int) -> float:
    spec = RewardSpec([RewardTerm(name=name)])
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    trajectories = [Trajectory(messages=list(messages)) for _ in range(batch)]

    async def steps() -> float:
        best = float("inf")
        for _ in range(repeats):  # one loop for all repeats, as the eval runner has
            t0 = time.perf_counter()
            await spec.ascore(trajectories)
            best = min(best, time.perf_counter() - t0)
        return best

    best = asyncio.run(steps())
    spec.close()
    return best / batch * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    for name in ("bench_async_instant", "bench_async_sleep", "bench_sync_instant"):
        us = per_call_us(name, args.batch, args.repeats)
        print(f"{name:22s} batch {args.batch:4d}: {us:8.1f} us per call (best of {args.repeats})")


if __name__ == "__main__":
    main()
