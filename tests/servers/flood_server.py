"""A stdio MCP server that floods its client with notifications while a call runs.

Tools: ``echo`` (its ``text``); ``sleep`` (``seconds``, then ``"slept"``); ``flood`` sends notifications of one
``kind`` - ``log`` (``notifications/message``), ``progress`` (``notifications/progress``) or
``list_changed`` (``notifications/tools/list_changed``) - as fast as it can for ``seconds``, then returns
how many it sent. Its tool list never changes, whatever it says.
"""

from __future__ import annotations

import asyncio
import time
import warnings

from mcp.server.mcpserver import Context, MCPServer

warnings.filterwarnings("ignore", "The logging capability is deprecated")  # it still works: a flood

mcp = MCPServer("flood", log_level="WARNING")


@mcp.tool()
def echo(text: str) -> str:
    """Return ``text``."""
    return text


@mcp.tool()
async def sleep(seconds: float) -> str:
    """Sleep ``seconds`` without blocking the server."""
    await asyncio.sleep(seconds)
    return "slept"


@mcp.tool()
async def flood(kind: str, seconds: float, ctx: Context) -> int:
    """Send notifications of ``kind`` (log, progress, list_changed) for ``seconds``; how many were sent."""
    sent, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        if kind == "log":
            await ctx.session.send_log_message(level="info", data=f"line {sent}", logger="flood")
        elif kind == "progress":
            await ctx.session.send_progress_notification(progress_token="flood", progress=sent)
        else:
            await ctx.session.send_tool_list_changed()
        sent += 1
    return sent


if __name__ == "__main__":
    mcp.run()
