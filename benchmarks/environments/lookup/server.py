"""A key-value lookup MCP server with a fixed, injected latency: the tool of the two-lookup benchmark.

    python server.py --latency 0.5

Each call sleeps ``--latency`` seconds (without blocking the server's loop, as a remote API would) and
then returns the crate's coin count from :func:`data.coins`, which no model can know without the call.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data import coins  # noqa: E402  (the table lives beside the server; the data script uses it too)

mcp = MCPServer("crate-lookup", log_level="WARNING")
LATENCY_S = 0.0


@mcp.tool()
async def lookup(crate: str) -> str:
    """Return how many coins a crate holds.

    Args:
        crate: the crate's label, e.g. "crate-0421".
    """
    await asyncio.sleep(LATENCY_S)
    try:
        return str(coins(crate))
    except ValueError as exc:
        raise ToolError(str(exc)) from None


def main() -> None:
    """Serve over stdio with the given latency."""
    global LATENCY_S
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each call takes")
    LATENCY_S = parser.parse_args().latency
    mcp.run()


if __name__ == "__main__":
    main()
