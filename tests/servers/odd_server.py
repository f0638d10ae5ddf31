"""A raw JSON-RPC stdio MCP server that misbehaves in ways the SDK's servers cannot, one per flag.

``python odd_server.py FLAG[,FLAG...]``:

* ``nonl``: prints ``Loading 100%\\r`` (no newline) before the protocol, gluing it onto the first reply;
* ``banner``: prints a whole banner line before the protocol;
* ``loopcursor``: ``tools/list`` answers every page with the same ``nextCursor``, forever;
* ``dup``: ``tools/list`` lists one tool twice;
* ``noschema``: one more tool, ``bare``, comes without ``inputSchema``;
* ``badschemas``: four more tools whose ``inputSchema`` is ``null``, a string, has no ``type`` or is an
  array's, beside the good ones;
* ``tasks``: two more tools, ``research`` (``execution.taskSupport: "required"``: only callable as an MCP
  task, as server-everything's ``simulate-research-query``) and ``quick`` (``"optional"``: callable plainly);
* ``nocaps``: ``initialize`` declares no capabilities at all, yet ``tools/list`` answers;
* ``media``: one more tool, ``media``: an image block, an audio block and text spelling ``<image>``,
  ``<video>`` and ``<audio>``, as a screenshot tool or a page about multimodal prompts returns;
* ``outschema``: one more tool, ``typed``, whose ``outputSchema`` requires ``result`` while its
  structuredContent has none;
* ``badblocks``: two more tools whose one content block is of a known type but malformed: ``textless``
  (a text block without ``text``) and ``hollow`` (a resource block whose resource has neither ``text``
  nor ``blob``).
* ``binary``: two more tools, ``blobs`` (embedded binary resources, one with a MIME type and one without, as
  server-filesystem's ``read_media_file`` sends a ``.bin`` file) and ``rawtext`` (text holding NULs, an ANSI
  colour escape, C1 controls and CRLF line ends, as server-filesystem's ``read_text_file`` reads a binary
  file).
* ``zod``: one more tool, ``zodded``, whose ``inputSchema`` is what zod-to-json-schema writes (TypeScript
  SDK servers): ``$schema``, ``additionalProperties: false`` and a parameter typed through ``definitions``.

* ``huge``: one more tool, ``manual``, whose description is 200,000 characters and whose parameter ``q``
  has a 50,000-character description (a server that ships its whole manual in its tool list), beside a
  parameter named ``description`` and a long ``default``, which are not prose.

Tools: ``echo`` (its arguments as JSON text), ``struct_error`` (``isError`` with only structuredContent),
``weird`` (a content block of an unknown type between two text blocks).
"""

from __future__ import annotations

import json
import sys

SCHEMA = {"type": "object", "properties": {}}
TOOLS = [{"name": name, "inputSchema": SCHEMA} for name in ("echo", "struct_error", "weird")]
BAD_SCHEMAS = {
    "null_schema": None,
    "text_schema": "object",
    "untyped": {"properties": {}},
    "listy": {"type": "array"},
}
ZOD_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"path": {"type": "string"}, "depth": {"$ref": "#/definitions/depth"}},
    "required": ["path"],
    "additionalProperties": False,
    "definitions": {"depth": {"type": "integer", "minimum": 0}},
}
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
RESULTS = {
    "media": {
        "content": [
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "audio", "data": "UklGRiQAAABXQVZF" * 100, "mimeType": "audio/wav"},
            {"type": "text", "text": "caption: <image> then <video>, and <audio>."},
        ]
    },
    "typed": {"content": [{"type": "text", "text": "{}"}], "structuredContent": {"other": 1}},
    "struct_error": {"content": [], "structuredContent": {"error": "quota exceeded"}, "isError": True},
    "textless": {"content": [{"type": "text"}]},
    "hollow": {"content": [{"type": "resource", "resource": {"uri": "file:///notes.txt"}}]},
    "blobs": {
        "content": [
            {"type": "resource", "resource": {"uri": "file:///x.bin", "blob": "AAECAwQF" * 400}},
            {
                "type": "resource",
                "resource": {"uri": "file:///a.pdf", "mimeType": "application/pdf", "blob": PNG},
            },
        ]
    },
    "rawtext": {
        "content": [
            {"type": "text", "text": "ELF\x00\x00\x00\x00\x01\x02 \x1b[31mred\x1b[0m \x85\x9b\r\nend\t."}
        ]
    },
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
    if "badschemas" in flags:
        tools = [*tools, *({"name": name, "inputSchema": schema} for name, schema in BAD_SCHEMAS.items())]
    if "tasks" in flags:
        tools = [
            *tools,
            {"name": "research", "inputSchema": SCHEMA, "execution": {"taskSupport": "required"}},
            {"name": "quick", "inputSchema": SCHEMA, "execution": {"taskSupport": "optional"}},
        ]
    if "media" in flags:
        tools = [*tools, {"name": "media", "inputSchema": SCHEMA}]
    if "outschema" in flags:
        output = {"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"]}
        tools = [*tools, {"name": "typed", "inputSchema": SCHEMA, "outputSchema": output}]
    if "huge" in flags:
        schema = {
            "type": "object",
            "properties": {
                "q": {"type": "string", "description": "Q" * 50_000},
                "description": {"type": "string", "description": "what to file", "default": "D" * 9_000},
            },
        }
        tools = [*tools, {"name": "manual", "description": "M" * 200_000, "inputSchema": schema}]
    if "badblocks" in flags:
        tools = [*tools, *({"name": name, "inputSchema": SCHEMA} for name in ("textless", "hollow"))]
    if "binary" in flags:
        tools = [*tools, *({"name": name, "inputSchema": SCHEMA} for name in ("blobs", "rawtext"))]
    if "zod" in flags:
        tools = [*tools, {"name": "zodded", "inputSchema": ZOD_SCHEMA}]
    for line in sys.stdin:
        message = json.loads(line)
        request_id, method = message.get("id"), message.get("method")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {} if "nocaps" in flags else {"tools": {}},
                "serverInfo": {"name": "odd", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": tools, **({"nextCursor": "again"} if "loopcursor" in flags else {})}
        elif method == "tools/call" and message["params"]["name"] == "research":
            error = {"code": -32601, "message": "Tool 'research' requires task augmentation"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})
            continue
        elif method == "tools/call":
            name = message["params"]["name"]
            arguments = message["params"].get("arguments") or {}
            result = RESULTS.get(name) or {"content": [{"type": "text", "text": json.dumps(arguments)}]}
        else:
            result = {}
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
