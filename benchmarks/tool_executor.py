"""How close does the executor get to the ideal for a burst of slow tool calls?

For N concurrent calls of a tool with latency L, the ideal wall time is L (everything overlaps) and the
serial baseline is N x L (one after another, as in ms-swift's example scheduler). For each N and L this
prints the measured wall time, the ratio to ideal and the speed-up over serial.

The serial baseline is measured in the same run on the same backend, on ``--serial-sample`` calls, and
scaled to N (running 1024 x 0.5 s serially would take 8.5 minutes; per-call cost is constant, so scaling
is exact up to noise).

Backends:
  python  an async Python tool (``asyncio.sleep``): the executor's own overhead.
  mcp     a real MCP server over stdio (``tests/servers/slow_server.py``), with ``--sessions`` client
          sessions, so JSON-RPC, pipes and the server's own event loop are in the measurement.

    python benchmarks/tool_executor.py --backend mcp --sessions 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from swift_rlfactory.tools import Limits, ToolCall, ToolExecutor, tool
from swift_rlfactory.tools.mcp import McpProvider
from swift_rlfactory.tools.mcp.config import McpServerConfig
from swift_rlfactory.tools.toolset import PythonProvider

ROOT = Path(__file__).resolve().parents[1]


@tool
async def sleep(seconds: float) -> str:
    """Sleep for ``seconds`` and answer."""
    await asyncio.sleep(seconds)
    return "slept"


def make_executor(backend: str, sessions: int) -> ToolExecutor:
    if backend == "python":
        provider = PythonProvider([sleep])
    else:
        server = ROOT / "tests" / "servers" / "slow_server.py"
        provider = McpProvider(
            "slow", McpServerConfig(command=sys.executable, args=[str(server)], sessions=sessions)
        )
    return ToolExecutor(
        [provider], Limits(max_concurrency=4096, call_timeout_s=600, max_output_tokens=None)
    ).start()


def timed(executor: ToolExecutor, n: int, latency: float) -> float:
    calls = [ToolCall("sleep", {"seconds": latency}) for _ in range(n)]
    t0 = time.perf_counter()
    records = executor.execute(calls)
    wall = time.perf_counter() - t0
    failed = [r.error for r in records if r.error]
    if failed:
        raise SystemExit(f"{len(failed)} calls failed, first: {failed[0]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["python", "mcp"], default="mcp")
    parser.add_argument("--sessions", type=int, default=4, help="MCP client sessions (server processes)")
    parser.add_argument("--calls", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--latency", type=float, nargs="+", default=[0.1, 0.5])
    parser.add_argument("--repeats", type=int, default=3, help="median of this many runs per cell")
    parser.add_argument("--serial-sample", type=int, default=8)
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()

    executor = make_executor(args.backend, args.sessions)
    rows = []
    try:
        timed(executor, 32, 0.01)  # warm-up: sessions open, imports done
        header = f"{'calls':>6} {'latency':>8} {'wall s':>8} {'x ideal':>8} {'serial s':>9} {'speed-up':>9}"
        print(f"backend={args.backend} sessions={args.sessions if args.backend == 'mcp' else '-'}")
        print(header)
        for latency in args.latency:
            per_call = statistics.median(timed(executor, 1, latency) for _ in range(args.serial_sample))
            for n in args.calls:
                wall = statistics.median(timed(executor, n, latency) for _ in range(args.repeats))
                serial = per_call * n
                row = {
                    "backend": args.backend,
                    "calls": n,
                    "latency_s": latency,
                    "wall_s": round(wall, 4),
                    "ratio_to_ideal": round(wall / latency, 4),
                    "serial_s": round(serial, 2),
                    "speedup_vs_serial": round(serial / wall, 1),
                }
                rows.append(row)
                print(
                    f"{n:>6} {latency:>8.2f} {wall:>8.3f} {row['ratio_to_ideal']:>8.3f} "
                    f"{serial:>9.1f} {row['speedup_vs_serial']:>8.1f}x"
                )
    finally:
        executor.close()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
