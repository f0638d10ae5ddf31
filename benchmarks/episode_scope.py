"""What an MCP server of ``scope: trajectory`` adds to a trajectory's start, against a shared one.

A trajectory's start is clocked from its episode's open to the end of its first tool call (``put``), as a
rollout meets it; its end, the episode's close (an HTTP session's DELETE; a stdio process given back).
Each variant runs ``--n`` trajectories against ``tests/servers/kv_server.py`` in the same run: a shared
stdio server, a leased stdio process (reset by ``reset_tool``, and restarted), a shared HTTP session, an HTTP
session per trajectory with ``ready_sessions`` open ahead (``--ready``; the default 8 unless given), and the
same with one open ahead (the mechanism before ``ready_sessions``). ``--concurrency`` run at once, each next
one as one ends; with ``--burst``, in groups that start together (a GRPO group), each group ``--gap-ms``
after the last ended (the model's turn). ``--only http`` leaves out the stdio variants.

    python benchmarks/episode_scope.py --n 100 --concurrency 1
    python benchmarks/episode_scope.py --n 96 --concurrency 8 --burst --only http
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swift_rlfactory.env.environment import Environment  # noqa: E402

KV_SERVER = ROOT / "tests" / "servers" / "kv_server.py"


def environment(folder: Path, entry: dict[str, Any]) -> Environment:
    config = {"name": "kv", "tools": {"mcp": {"mcpServers": {"kv": entry}}}, "limits": {"call_timeout_s": 60}}
    path = folder / f"env-{time.monotonic_ns()}.yaml"
    path.write_text(json.dumps(config))
    return Environment.load(path).start()


async def one(env: Environment, key: str) -> tuple[float, float]:
    """(start, end) of one trajectory in ms: open + its first call, and its close."""
    started = time.perf_counter()
    if env.episodes.enabled:
        await env.episodes.open(key, {})
    record = await env.call_tool("put", {"key": "k", "value": key}, env.episodes.state(key), key)
    assert record.ok, record.error
    first = time.perf_counter()
    await env.call_tool("get", {"key": "k"}, env.episodes.state(key), key)
    ending = time.perf_counter()
    await env.episodes.close(key)
    return (first - started) * 1000, (time.perf_counter() - ending) * 1000


async def variant(env: Environment, args: argparse.Namespace) -> tuple[list[float], list[float]]:
    for i in range(3):  # warm-up: the pool's first processes, the HTTP client's first connection
        await one(env, f"warm-{i}")
    if args.burst:
        return await bursts(env, args.n, args.concurrency, args.gap_ms / 1000)
    n, concurrency = args.n, args.concurrency
    starts, ends = [], []
    gate = asyncio.Semaphore(concurrency)

    async def limited(i: int) -> None:
        async with gate:
            start, end = await one(env, f"t{i}")
            starts.append(start)
            ends.append(end)

    await asyncio.gather(*(limited(i) for i in range(n)))
    return starts, ends


async def bursts(env: Environment, n: int, size: int, gap: float) -> tuple[list[float], list[float]]:
    """``n`` trajectories in groups of ``size`` that start at once, each group ``gap`` s after the last ended."""
    starts, ends = [], []
    for first in range(0, n, size):
        await asyncio.sleep(gap)
        group = range(first, min(first + size, n))
        for start, end in await asyncio.gather(*(one(env, f"t{i}") for i in group)):
            starts.append(start)
            ends.append(end)
    return starts, ends


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def serve_http() -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, str(KV_SERVER), "--transport", "streamable-http", "--port", str(port)]
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the kv server did not listen") from None
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="trajectories per variant")
    parser.add_argument("--concurrency", type=int, default=1, help="trajectories at once")
    parser.add_argument("--pool", type=int, default=8, help="processes of the leased stdio server")
    parser.add_argument("--ready", type=int, help="ready_sessions of the HTTP server (default: its default)")
    parser.add_argument("--burst", action="store_true", help="groups of --concurrency start at once")
    parser.add_argument("--gap-ms", type=float, default=300, help="with --burst: pause between groups")
    parser.add_argument("--only", choices=["http", "stdio"], help="only the variants of one transport")
    args = parser.parse_args()
    stdio = {"command": sys.executable, "args": [str(KV_SERVER)]}
    proc, url = serve_http()
    ready = {"ready_sessions": args.ready} if args.ready else {}
    variants = {
        "stdio, shared": stdio,
        "stdio, leased (reset_tool)": {
            **stdio,
            "scope": "trajectory",
            "pool": args.pool,
            "reset_tool": "reset",
        },
        "stdio, leased (restart)": {**stdio, "scope": "trajectory", "pool": args.pool},
        "HTTP, shared session": {"url": url},
        "HTTP, session per trajectory": {"url": url, "scope": "trajectory", **ready},
        "HTTP, session per trajectory, 1 ahead": {"url": url, "scope": "trajectory", "ready_sessions": 1},
    }
    if args.only:
        variants = {k: v for k, v in variants.items() if k.lower().startswith(args.only)}
    rows = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            for name, entry in variants.items():
                env = environment(Path(folder), entry)
                try:
                    rows[name] = asyncio.run(variant(env, args))
                finally:
                    env.close()
    finally:
        proc.kill()
        proc.wait()
    mode = f"bursts, gap {args.gap_ms:g} ms" if args.burst else "each next as one ends"
    print(
        f"n={args.n} concurrency={args.concurrency} ({mode}) pool={args.pool} ready={args.ready or 'default'}"
    )
    print("| variant | start p50 (ms) | start p90 (ms) | added p50 vs shared (ms) | end p50 (ms) |")
    print("| --- | --- | --- | --- | --- |")
    for name, (starts, ends) in rows.items():
        shared = rows["stdio, shared" if name.startswith("stdio") else "HTTP, shared session"][0]
        added = statistics.median(starts) - statistics.median(shared)
        print(
            f"| {name} | {statistics.median(starts):.1f} | {percentile(starts, 90):.1f} | "
            f"{added:+.1f} | {statistics.median(ends):.1f} |"
        )


if __name__ == "__main__":
    main()
