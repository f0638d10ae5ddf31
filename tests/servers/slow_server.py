"""An MCP server for the tool-backend tests: slow, failing, crashing, huge, stateful and structured tools.

Run over stdio (the default) or, for the remote-transport tests, over HTTP::

    python slow_server.py --transport streamable-http --host 127.0.0.1 --port 8931   # .../mcp
    python slow_server.py --transport sse --host 127.0.0.1 --port 8932               # .../sse
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import time
from collections import Counter

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

mcp = MCPServer("slow", log_level="WARNING")
_counts: Counter[str] = Counter()


@mcp.tool()
async def sleep(seconds: float) -> str:
    """Wait ``seconds`` without blocking other calls, then say so."""
    await asyncio.sleep(seconds)
    return "slept"


@mcp.tool()
def echo(text: str) -> str:
    """Return ``text`` unchanged."""
    return text


@mcp.tool()
def pid() -> int:
    """The server's process id, so a test can kill the process under the client."""
    return os.getpid()


@mcp.tool()
def fail(message: str) -> str:
    """Always fail; the client receives an ``isError`` result carrying ``message``.

    Only ``ToolError`` reaches the client with its text: any other exception is reported as a bare
    "Error executing tool fail", keeping server internals private.
    """
    raise ToolError(message)


@mcp.tool()
def count(key: str) -> int:
    """Increment and return the counter of ``key``: how many times this call really ran here."""
    _counts[key] += 1
    return _counts[key]


@mcp.tool()
def shape() -> dict[str, object]:
    """A nested dict, to check that structured results render as JSON text."""
    return {"name": "cube", "sides": 6, "size": {"w": 1.5, "h": 1.5}, "tags": ["solid", "regular"]}


@mcp.tool()
def find(key: str, many: bool = True) -> list[str] | None:
    """The stored lines matching ``key``: none, ever (``[]``, or ``None`` without ``many``). The SDK sends
    either as no content blocks and structuredContent ``{"result": []}`` / ``{"result": null}``, as
    FastMCP sends ``None`` for a tool whose return type allows it."""
    return [] if many else None


@mcp.tool()
def crash(code: int = 1) -> str:
    """Exit the server process at once, as a segfault or an OOM kill would; a poison call."""
    os._exit(code)


@mcp.tool()
async def block(seconds: float = 3600) -> str:
    """Block the server's event loop for ``seconds``: a hung server (a deadlock, a stuck native call) that
    answers nothing, not even a ping, yet does not exit."""
    time.sleep(seconds)
    return "unblocked"


@mcp.tool()
def big(megabytes: float) -> str:
    """A result of ``megabytes`` MiB, to test the client's cap on result size."""
    return "x" * int(megabytes * 2**20)


@mcp.tool()
def getenv(name: str, digest: bool = False) -> str:
    """The server's value of environment variable ``name``, or ``<unset>``; with ``digest``, its SHA-256
    instead, which shows the server got a secret without the secret in the result."""
    value = os.environ.get(name)
    if value is None:
        return "<unset>"
    return hashlib.sha256(value.encode()).hexdigest() if digest else value


def main() -> None:
    """Serve over the transport named on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=["stdio", "sse", "streamable-http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--json-response", action="store_true", help="streamable HTTP answers in JSON bodies")
    args = parser.parse_args()
    if args.transport == "stdio":
        mcp.run()
    elif args.json_response:
        mcp.run(args.transport, host=args.host, port=args.port, json_response=True)
    else:
        mcp.run(args.transport, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
