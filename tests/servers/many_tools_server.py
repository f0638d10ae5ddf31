"""A minimal stdio MCP server listing as many tools as its command line says (``many_tools_server.py
5000``), each with a description and a small input schema, as a server generated from a large API may.
Every tool answers a call with its own name."""

from __future__ import annotations

import json
import sys


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tool(i: int) -> dict:
    return {
        "name": f"endpoint_{i:05d}",
        "description": f"Call endpoint number {i} of the service and return what it answers.",
        "inputSchema": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to ask the endpoint."}},
            "required": ["query"],
        },
    }


def main() -> None:
    """Answer initialize, tools/list and tools/call, one JSON-RPC line per request."""
    tools = [tool(i) for i in range(int(sys.argv[1]))]
    for line in sys.stdin:
        message = json.loads(line)
        request_id, method = message.get("id"), message.get("method")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "many", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": tools}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": message["params"]["name"]}]}
        else:
            result = {}
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
