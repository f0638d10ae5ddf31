"""A stateful MCP server for the per-trajectory tests: ``put(key, value)`` / ``get(key)`` kept in memory.

Over stdio the whole process is one store; over streamable HTTP each MCP session (``Mcp-Session-Id``) has
its own store, and ``sessions`` counts the sessions the server holds open (a client that closes its
session sends DELETE and the count drops); ``session`` names the caller's session and ``session_ids`` every
open one. ``reset`` empties the store; ``crash`` exits the process.

    python kv_server.py                                                   # stdio
    python kv_server.py --transport streamable-http --host 127.0.0.1 --port 8933   # .../mcp
"""

from __future__ import annotations

import argparse
import os

from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("kv", log_level="WARNING")
_stores: dict[str, dict[str, str]] = {}


def _store(ctx: Context) -> dict[str, str]:
    session = ctx.headers.get("mcp-session-id", "") if ctx.headers else ""  # "" over stdio: one store
    return _stores.setdefault(session, {})


@mcp.tool()
def put(key: str, value: str, ctx: Context) -> str:
    """Remember ``value`` under ``key``."""
    _store(ctx)[key] = value
    return "ok"


@mcp.tool()
def get(key: str, ctx: Context) -> str:
    """The value remembered under ``key``, or ``<none>``."""
    return _store(ctx).get(key, "<none>")


@mcp.tool()
def reset(ctx: Context) -> str:
    """Forget everything this store holds."""
    _store(ctx).clear()
    return "reset"


@mcp.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@mcp.tool()
def crash() -> str:
    """Exit the process at once, as a server that dies mid-trajectory."""
    os._exit(3)


@mcp.tool()
def sessions() -> int:
    """MCP sessions the HTTP server holds open now (0 over stdio)."""
    try:
        manager = mcp.session_manager
    except RuntimeError:  # stdio: no session manager
        return 0
    return len(manager._server_instances)


@mcp.tool()
def session(ctx: Context) -> str:
    """This call's MCP session id (empty over stdio)."""
    return ctx.headers.get("mcp-session-id", "") if ctx.headers else ""


@mcp.tool()
def session_ids() -> str:
    """The ids of the MCP sessions the HTTP server holds open now, one per line (empty over stdio)."""
    try:
        manager = mcp.session_manager
    except RuntimeError:
        return ""
    return "\n".join(manager._server_instances)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", default="stdio", choices=["stdio", "streamable-http"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8933)
    args = parser.parse_args()
    if args.transport == "stdio":
        mcp.run()
    else:
        mcp.run(args.transport, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
