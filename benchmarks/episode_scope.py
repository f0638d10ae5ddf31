"""What an MCP server of ``scope: trajectory`` adds to a trajectory's start, against a shared one.

A trajectory's start is clocked from its episode's open to the end of its first tool call (``put``), as a
rollout meets it; its end, the episode's close (an HTTP session's DELETE; a stdio process given back).
Each variant runs ``--n`` trajectories one after another (``--concurrency`` at once) against
``tests/servers/kv_server.py`` in the same run: a shared stdio server, a leased stdio process (reset by
``reset_tool``, and restarted), a shared HTTP session and an HTTP session per trajectory.

    python benchmarks/episode_scope.py --n 100 --concurrency 1
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


async def variant(env: Environment, n: int, concurrency: int) -> tuple[list[float], list[float]]:
    for i in range(3):  # warm-up: the pool's first processes, the HTTP client's first connection
        await one(env, f"warm-{i}")
    starts, ends = [], []
    gate = asyncio.Semaphore(concurrency)

    async def limited(i: int) -> None:
        async with gate:
            start, end = await one(env, f"t{i}")
            starts.append(start)
            ends.append(end)

    await asyncio.gather(*(limited(i) for i in range(n)))
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
    args = parser.parse_args()
    stdio = {"command": sys.executable, "args": [str(KV_SERVER)]}
    proc, url = serve_http()
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
        "HTTP, session per trajectory": {"url": url, "scope": "trajectory"},
    }
    rows = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            for name, entry in variants.items():
                env = environment(Path(folder), entry)
                try:
                    rows[name] = asyncio.run(variant(env, args.n, args.concurrency))
                finally:
                    env.close()
    finally:
        proc.kill()
        proc.wait()
    print(f"n={args.n} concurrency={args.concurrency} pool={args.pool}")
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
