"""What does a bubblewrap sandbox add to each ``run_python`` call?

One call of ``run_python`` starts ``[setpriv] bwrap prlimit python`` and runs the program. The program's
own start-up (the interpreter) is paid with or without the sandbox, so the overhead is measured against a
plain ``python -c`` subprocess of the same interpreter, started the same way (asyncio), in the same run:

  plain     ``python -c 'print(1)'`` as an asyncio subprocess
  sandbox   the same command through :class:`~swift_rlfactory.tools.sandbox.Sandbox` (bwrap + limits)
  tool      ``run_python`` with ``print(1)``: the sandbox plus the bootstrap that saves the program to
            /tmp/main.py, which is what a model's call costs
  persistent_first   ``run_python`` with ``persistent: true``, a trajectory's first call: its interpreter
            starts (and is torn down after the call, in the time)
  persistent         the same, a later call of a trajectory whose interpreter is running (16 trajectories,
            one per concurrent call)

Each is run ``--n`` times one after another (latency per call) and ``--concurrency`` at a time (latency per
call when a GRPO turn sends many calls at once, and calls per second). Modes alternate in rounds so drift
in machine load hits all modes alike. Targets: sandbox − plain < 0.2 s at p50; a persistent interpreter's
later call at least 3x faster than ``tool`` (a fresh sandbox) at p50 and p90.

    python benchmarks/sandbox.py --n 50 --concurrency 16 --out /tmp/sandbox
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from itertools import cycle
from pathlib import Path

from swift_rlfactory.tools.episode_state import current_episode
from swift_rlfactory.tools.sandbox import RunPythonConfig, Sandbox, SandboxProvider


async def plain(python: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        python, "-c", "print(1)", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert out.strip() == b"1"


def summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "mean_s": statistics.fmean(ordered),
        "p50_s": statistics.median(ordered),
        "p90_s": ordered[min(len(ordered) - 1, round(0.90 * (len(ordered) - 1)))],
        "p95_s": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
        "n": len(ordered),
    }


async def timed(call: Callable[[], Awaitable[None]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def measure(modes: dict[str, Callable[[], Awaitable[None]]], n: int, concurrency: int, rounds: int):
    sequential: dict[str, list[float]] = {m: [] for m in modes}
    concurrent: dict[str, list[float]] = {m: [] for m in modes}
    throughput: dict[str, list[float]] = {m: [] for m in modes}
    for call in modes.values():  # warm the page cache and the interpreter's files
        await call()
    for _ in range(rounds):
        for name, call in modes.items():
            for _ in range(n // rounds):
                sequential[name].append(await timed(call))
            start = time.perf_counter()
            concurrent[name].extend(await asyncio.gather(*(timed(call) for _ in range(concurrency))))
            throughput[name].append(concurrency / (time.perf_counter() - start))
    return {
        name: {
            "sequential": summary(sequential[name]),
            f"concurrent_{concurrency}": summary(concurrent[name]),
            "calls_per_s_concurrent": statistics.median(throughput[name]),
        }
        for name in modes
    }


async def main_async(args: argparse.Namespace) -> dict:
    [tool] = await SandboxProvider(RunPythonConfig(timeout_s=60)).start()
    python = tool.python  # the interpreter the sandbox really runs (as root: one nobody can read)
    sandbox = Sandbox(RunPythonConfig(timeout_s=60))

    async def sandboxed() -> None:
        result = await sandbox.run([python, "-c", "print(1)"])
        assert result.ok and result.stdout.strip() == "1", result

    async def run_python() -> None:
        assert await tool.call({"code": "print(1)"}) == "1"

    provider = SandboxProvider(RunPythonConfig(timeout_s=60, persistent=True, max_live=2 * args.concurrency))
    [persistent_tool] = await provider.start()
    keys = cycle(
        [f"bench-{i}" for i in range(args.concurrency)]
    )  # a gather of `concurrency` calls: all apart

    async def persistent_first() -> None:
        key = f"first-{uuid.uuid4().hex}"
        current_episode.set(key)
        assert await persistent_tool.call({"code": "print(1)"}) == "1"
        await provider.release(key)

    async def persistent() -> None:
        current_episode.set(next(keys))
        assert await persistent_tool.call({"code": "print(1)"}) == "1"

    for _ in range(args.concurrency):  # every trajectory's first call, before any is measured
        await persistent()
    modes = {
        "plain": lambda: plain(python),
        "sandbox": sandboxed,
        "tool": run_python,
        "persistent_first": persistent_first,
        "persistent": persistent,
    }
    try:
        results = await measure(modes, args.n, args.concurrency, args.rounds)
    finally:
        await provider.close()
    phases = ("sequential", f"concurrent_{args.concurrency}")
    overhead = {key: results["sandbox"][key]["p50_s"] - results["plain"][key]["p50_s"] for key in phases}
    speedup = {
        f"{key}_{q}": results["tool"][key][f"{q}_s"] / results["persistent"][key][f"{q}_s"]
        for key in phases
        for q in ("p50", "p90")
    }
    return {
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "python": python,
        "bwrap": sandbox.bwrap,
        "as_root": os.geteuid() == 0,
        "cpus": os.cpu_count(),
        "load_average_before": os.getloadavg(),
        "kernel": platform.release(),
        "results": results,
        "overhead_p50_s": overhead,
        "target_s": 0.2,
        "persistent_speedup": speedup,
        "persistent_target": 3.0,
    }


def markdown(report: dict, concurrency: int) -> str:
    lines = [
        f"`{report['command']}` — {report['cpus']} CPUs, load average {report['load_average_before'][0]:.1f} "
        f"before the run, kernel {report['kernel']}, interpreter {report['python']}",
        "",
        f"| mode | sequential p50 | p90 | mean | p95 | {concurrency} at once p50 | p90 | p95 "
        f"| calls/s at {concurrency} |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in report["results"].items():
        s, c = r["sequential"], r[f"concurrent_{concurrency}"]
        lines.append(
            f"| {name} | {_ms(s['p50_s'])} | {_ms(s['p90_s'])} | {_ms(s['mean_s'])} | {_ms(s['p95_s'])} "
            f"| {_ms(c['p50_s'])} | {_ms(c['p90_s'])} | {_ms(c['p95_s'])} "
            f"| {r['calls_per_s_concurrent']:.0f} |"
        )
    o, x = report["overhead_p50_s"], report["persistent_speedup"]
    at_once = f"concurrent_{concurrency}"
    lines += [
        "",
        f"Sandbox overhead over plain, p50: {o['sequential'] * 1000:.0f} ms sequential, "
        f"{o[at_once] * 1000:.0f} ms at {concurrency} at once (target < 200 ms).",
        f"Persistent interpreter's later call vs a fresh sandbox (tool / persistent): "
        f"{x['sequential_p50']:.0f}x at p50, {x['sequential_p90']:.0f}x at p90 sequential; "
        f"{x[f'{at_once}_p50']:.0f}x, {x[f'{at_once}_p90']:.0f}x at {concurrency} at once (target >= 3x).",
    ]
    return "\n".join(lines) + "\n"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 0.01 else f"{seconds * 1000:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="sequential calls per mode")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5, help="modes alternate this many times")
    parser.add_argument("--out", type=Path, default=None, help="folder for sandbox.json and sandbox.md")
    args = parser.parse_args()
    report = asyncio.run(main_async(args))
    text = markdown(report, args.concurrency)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "sandbox.json").write_text(json.dumps(report, indent=2) + "\n")
        (args.out / "sandbox.md").write_text(text)


if __name__ == "__main__":
    main()
