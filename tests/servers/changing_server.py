"""A stdio MCP server whose tool list changes while it runs, and says so (``notifications/tools/list_changed``).

Tools: ``echo`` (its ``text``); ``unlock`` adds ``secret`` (returns ``"open sesame"``), which is not listed
at start, as a server that enables a tool at runtime (FastMCP's ``tool.enable()``); ``retire`` removes
``echo``. Each change is announced with ``notifications/tools/list_changed`` before the call returns.
Every server process has its own tool list: ``unlock`` on one process adds ``secret`` there only.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("changing", log_level="WARNING")


@mcp.tool()
def echo(text: str) -> str:
    """Return ``text``."""
    return text


def secret() -> str:
    """The word that opens the door."""
    return "open sesame"


@mcp.tool()
async def unlock(ctx: Context) -> str:
    """Add the ``secret`` tool."""
    mcp.add_tool(secret)
    await ctx.session.send_tool_list_changed()
    return "unlocked"


@mcp.tool()
async def retire(ctx: Context) -> str:
    """Remove the ``echo`` tool."""
    mcp.remove_tool("echo")
    await ctx.session.send_tool_list_changed()
    return "retired"


if __name__ == "__main__":
    mcp.run()
