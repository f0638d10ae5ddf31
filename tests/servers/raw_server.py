"""A minimal stdio MCP server that writes raw bytes, as a server in another language may.

The Python SDK always writes clean UTF-8 JSON; servers written elsewhere do not always. Each tool here
answers with one kind of bad line, to test what the client makes of it:

* ``latin1``: the text is Latin-1 bytes (``caf\\xe9``), not UTF-8;
* ``surrogate``: the text holds a lone UTF-16 surrogate escape (``\\ud83d``, half an emoji), which is
  valid Python JSON but not valid JSON text for strict parsers;
* ``garbled``: the reply is cut off mid-object, not JSON at all, though its ``"id"`` can still be read;
* ``ok``: a clean reply, to show the session still works;
* ``ask``: an ``input_required`` result (protocol 2026-07-28's InputRequiredResult) asking for a form
  (elicitation), as a tool that needs the user's answer before it can go on;
* ``ask_bare``: an ``input_required`` result with neither ``inputRequests`` nor ``requestState``.
"""

from __future__ import annotations

import json
import sys

REPLIES = {
    "latin1": b'{"type": "text", "text": "caf\xe9 cr\xe8me"}',
    "surrogate": b'{"type": "text", "text": "cut emoji \\ud83d"}',
    "ok": b'{"type": "text", "text": "fine"}',
}
FORM = {"type": "object", "properties": {"account": {"type": "string"}}}
ELICIT = {"method": "elicitation/create", "params": {"message": "Which account?", "requestedSchema": FORM}}
ASKS = {
    "ask": {"resultType": "input_required", "inputRequests": {"account": ELICIT}},
    "ask_bare": {"resultType": "input_required"},
}


def send(data: bytes) -> None:
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


def main() -> None:
    """Answer initialize, tools/list and tools/call, one JSON-RPC line per request."""
    for line in sys.stdin.buffer:
        message = json.loads(line)
        request_id, method = message.get("id"), message.get("method")
        if request_id is None:
            continue  # a notification
        head = b'{"jsonrpc": "2.0", "id": %s, ' % json.dumps(request_id).encode()
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "0"},
            }
            send(head + b'"result": ' + json.dumps(result).encode() + b"}")
        elif method == "tools/list":
            schema = {"type": "object", "properties": {}}
            tools = [{"name": name, "inputSchema": schema} for name in [*REPLIES, "garbled", *ASKS]]
            send(head + b'"result": ' + json.dumps({"tools": tools}).encode() + b"}")
        elif method == "tools/call" and message["params"]["name"] == "garbled":
            send(head + b'"result": {"content": [{"type": "te')
        elif method == "tools/call" and message["params"]["name"] in ASKS:
            send(head + b'"result": ' + json.dumps(ASKS[message["params"]["name"]]).encode() + b"}")
        elif method == "tools/call":
            block = REPLIES[message["params"]["name"]]
            send(head + b'"result": {"content": [' + block + b'], "isError": false}}')
        else:
            send(head + b'"result": {}}')


if __name__ == "__main__":
    main()
