"""An MCP server that tells a client how it introduced itself, for the tests of what our client declares.

Tool ``whoami``: the ``clientInfo`` and ``capabilities`` of the client's ``initialize`` request, as JSON.
Over stdio (the default) or streamable HTTP::

    python whoami_server.py --port 8941   # http://127.0.0.1:8941/mcp
"""

from __future__ import annotations

import argparse
import json

from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("whoami", log_level="WARNING")


@mcp.tool()
def whoami(ctx: Context) -> str:
    """The client's name, version and capabilities, as it sent them."""
    params = ctx.session.client_params
    assert params is not None
    return json.dumps(
        {
            "clientInfo": params.client_info.model_dump(mode="json", by_alias=True, exclude_none=True),
            "capabilities": params.capabilities.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, help="serve streamable HTTP on 127.0.0.1:PORT, not stdio")
    args = parser.parse_args()
    if args.port is None:
        mcp.run()
    else:
        mcp.run("streamable-http", host="127.0.0.1", port=args.port)
