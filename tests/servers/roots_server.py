"""A stdio MCP server that asks the client for its roots, as server-filesystem does when started without a
folder argument (VS Code answers with the workspace folder).

Tool ``roots``: the client's answer to ``roots/list``, one ``URI name`` line per root, or the error.
"""

from __future__ import annotations

import warnings

from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("roots", log_level="WARNING")


@mcp.tool()
async def roots(ctx: Context) -> str:
    """The roots the client advertises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # roots are deprecated from protocol 2026-07-28 on; clients use them
        try:
            result = await ctx.session.list_roots()
        except Exception as exc:
            return f"no roots: {type(exc).__name__}: {exc}"
    return "\n".join(f"{root.uri} {root.name}" for root in result.roots)


if __name__ == "__main__":
    mcp.run()
