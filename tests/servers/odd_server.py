"""A raw JSON-RPC stdio MCP server that misbehaves in ways the SDK's servers cannot, one per flag.

``python odd_server.py FLAG[,FLAG...]``:

* ``nonl``: prints ``Loading 100%\\r`` (no newline) before the protocol, gluing it onto the first reply;
* ``banner``: prints a whole banner line before the protocol;
* ``loopcursor``: ``tools/list`` answers every page with the same ``nextCursor``, forever;
* ``dup``: ``tools/list`` lists one tool twice;
* ``noschema``: one more tool, ``bare``, comes without ``inputSchema``.

Tools: ``echo`` (its arguments as JSON text), ``struct_error`` (``isError`` with only structuredContent),
``weird`` (a content block of an unknown type between two text blocks).
"""

from __future__ import annotations

import json
import sys

SCHEMA = {"type": "object", "properties": {}}
TOOLS = [{"name": name, "inputSchema": SCHEMA} for name in ("echo", "struct_error", "weird")]
RESULTS = {
    "struct_error": {"content": [], "structuredContent": {"error": "quota exceeded"}, "isError": True},
    "weird": {
        "content": [
            {"type": "text", "text": "before"},
            {"type": "hologram", "frames": 3},
            {"type": "text", "text": "after"},
        ]
    },
}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    flags = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else set()
    if "nonl" in flags:
        sys.stdout.write("Loading 100%\r")
        sys.stdout.flush()
    if "banner" in flags:
        print("Weather server v1.2 starting on stdio...", flush=True)
    tools = TOOLS + TOOLS[:1] if "dup" in flags else TOOLS
    if "noschema" in flags:
        tools = [*tools, {"name": "bare", "description": "no inputSchema"}]
    for line in sys.stdin:
        message = json.loads(line)
        request_id, method = message.get("id"), message.get("method")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "odd", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": tools, **({"nextCursor": "again"} if "loopcursor" in flags else {})}
        elif method == "tools/call":
            name = message["params"]["name"]
            arguments = message["params"].get("arguments") or {}
            result = RESULTS.get(name) or {"content": [{"type": "text", "text": json.dumps(arguments)}]}
        else:
            result = {}
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
