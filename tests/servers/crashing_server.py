"""A stdio MCP server for the crash-recovery tests: calls that say when they ran, a crash that comes on a
timer (no call in flight causes it, so none is poison), and a call that crashes the server each time."""

from __future__ import annotations

import asyncio
import os
import time

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("crashing", log_level="WARNING")


@mcp.tool()
async def sleep(seconds: float) -> str:
    """Wait ``seconds`` without blocking other calls; return when it ran, as ``"<start> <end>"`` in seconds
    of the wall clock, so that a test can tell calls that ran together from calls run one at a time."""
    start = time.time()
    await asyncio.sleep(seconds)
    return f"{start:.3f} {time.time():.3f}"


@mcp.tool()
async def exit_after(seconds: float) -> str:
    """Make the process exit by itself (``os._exit(1)``, as a segfault would end it) ``seconds`` from now,
    whatever calls are running then; answers at once, with the wall-clock time it will exit at."""
    asyncio.get_running_loop().call_later(seconds, os._exit, 1)
    return f"{time.time() + seconds:.3f}"


@mcp.tool()
def crash() -> str:
    """Exit the process at once, every time: a poison call."""
    os._exit(1)


if __name__ == "__main__":
    mcp.run()
