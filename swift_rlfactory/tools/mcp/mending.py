"""The server's messages mended before the SDK validates them (a faulty tool or content block is fixed or
dropped alone instead of failing a whole reply), and refused POSTs' HTTP status added to their error replies.
See docs/mcp.md, "Mending"."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCNotification, JSONRPCResponse

from .framing import excerpt

# The content block types of the MCP specification; a block of any other type is replaced by a short note.
_CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})
_NO_PARAMETERS = {"type": "object", "properties": {}}


@asynccontextmanager
async def mended(
    read: Any,
    http_errors: dict[int | str, str],
    notes: list[str],
    hung_up: asyncio.Event,
    consumed: Callable[[str], bool] = lambda method: False,
) -> AsyncIterator[Any]:
    """The server's messages with the faults fixed that would fail a whole reply in the SDK's validation,
    and the HTTP status added to the error replies of refused POSTs.

    The SDK validates a reply whole, so one odd part loses all of it (one tool's ``"inputSchema": null``
    failed the whole server, naming only ``tools.3``). Before it sees them, here (for every transport
    alike) a ``tools/list`` page has a tool without ``inputSchema`` given an empty one, and a tool without
    a name or with an input schema that is no JSON object schema (``null``, a string, no ``"type"``, an
    array's) dropped, each noted in ``notes`` (which the provider logs once, naming the server): that tool
    is lost, the others work. A ``tools/call`` result has a content block of a type the specification
    does not know replaced by a one-line note, so the rest still renders, and an ``input_required``
    result becomes an error result saying what the server asked for (:func:`_input_required`): the SDK
    would fail it as a call result without ``content``. Replies are told apart by shape: only a tool
    listing has ``tools``, only a call result ``content`` or a ``resultType``.

    A streamable-HTTP POST answered with 401, 403 or 500 comes back from the SDK as an error saying only
    "Server returned an error response"; the transport notes each refused request's status in
    ``http_errors`` (by request id), and its error reply here gets it appended, so the model and the logs
    read "... (HTTP 401 Unauthorized)": the status only, never a header or the body.

    A notification for which ``consumed(method)`` is true is handled there and not passed on (the SDK
    spawns a task for each notification it gets, so a flood of them would pile up tasks and slow calls).

    ``hung_up`` is set when the server's messages end (a stdio server's stdout closed: it exited; an SSE
    event stream dropped), so a call sent after it is known never to have reached the server.
    """
    to_session, mended = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def relay() -> None:
        async with to_session:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                async for message in read:
                    if (
                        isinstance(message, SessionMessage)
                        and isinstance(message.message, JSONRPCNotification)
                        and consumed(message.message.method)
                    ):
                        continue
                    if isinstance(message, SessionMessage) and isinstance(message.message, JSONRPCResponse):
                        _mend(message.message.result, notes)
                    elif isinstance(message, SessionMessage) and isinstance(message.message, JSONRPCError):
                        message = _with_status(message, http_errors.pop(message.message.id, None))
                    await to_session.send(message)
            hung_up.set()  # the stream ended (not the relay cancelled): the server's side is gone

    async with anyio.create_task_group() as tg:
        tg.start_soon(relay)
        try:
            yield mended
        finally:
            mended.close()
            tg.cancel_scope.cancel()


def _with_status(message: SessionMessage, status: str | None) -> SessionMessage:
    """An error reply with the HTTP status of its refused POST appended to its message (if there was one)."""
    error = message.message
    if status is None or not isinstance(error, JSONRPCError) or status in error.error.message:
        return message
    mended = error.error.model_copy(update={"message": f"{error.error.message} ({status})"})
    return SessionMessage(error.model_copy(update={"error": mended}), metadata=message.metadata)


def _mend(result: Any, notes: list[str]) -> None:
    """Fix one reply's ``result`` in place, noting what was changed in ``notes`` (see :func:`mended`)."""
    if not isinstance(result, dict):
        return
    if result.get("resultType") == "input_required":
        note = _input_required(result)
        result.clear()
        result.update(content=[{"type": "text", "text": note}], isError=True)
        return
    tools, content = result.get("tools"), result.get("content")
    if isinstance(tools, list):
        kept = []
        for tool in tools:
            name = tool.get("name") if isinstance(tool, dict) else None
            if not isinstance(name, str):
                notes.append(f"listed a tool without a name, skipped: {excerpt(repr(tool).encode())}")
                continue
            if "inputSchema" not in tool:
                notes.append(f"listed tool {name!r} without inputSchema; it takes no arguments")
                tool["inputSchema"] = dict(_NO_PARAMETERS)
            elif fault := _schema_fault(tool["inputSchema"]):
                notes.append(f"tool {name!r} dropped: its inputSchema {fault}")
                continue
            kept.append(tool)
        result["tools"] = kept
    if isinstance(content, list):
        for i, block in enumerate(content):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind not in _CONTENT_TYPES:
                content[i] = {
                    "type": "text",
                    "text": f"[content of unknown type {str(kind)[:50]!r} left out]",
                }


_INPUT_KINDS = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


def _input_required(result: dict[str, Any]) -> str:
    """The error for an ``input_required`` result (protocol 2026-07-28's InputRequiredResult), saying what
    the server asked for: the answer to a form (with its question), a model's completion, roots.

    The server wants the client to fulfil its ``inputRequests`` and send the call again; in a training run
    nobody is there to fill in a form, and no client-side model answers, so the call ends here.
    """
    requests = result.get("inputRequests")
    asked = []
    for request in requests.values() if isinstance(requests, dict) else ():
        method = request.get("method") if isinstance(request, dict) else None
        kind = _INPUT_KINDS.get(method, str(method)[:50]) if isinstance(method, str) else "input"
        params = request.get("params") if isinstance(request, dict) else None
        message = params.get("message") if isinstance(params, dict) else None
        asked.append(f"{kind}: {message[:200]!r}" if isinstance(message, str) else kind)
    what = f" ({'; '.join(asked)})" if asked else ""
    return f"the server asks for input{what}, which a training run cannot give; the tool did not finish"


def _schema_fault(schema: Any) -> str | None:
    """Why ``schema`` cannot be a tool's input schema (the specification asks for a JSON Schema object with
    ``"type": "object"``, and the model's template renders it as the function's parameters), or ``None``."""
    if not isinstance(schema, dict):
        return f"is {'null' if schema is None else 'a ' + type(schema).__name__}, not a JSON object"
    if "type" not in schema:
        return 'has no "type" (it must be {"type": "object", "properties": ...})'
    if schema["type"] != "object":
        return f'has "type": {json.dumps(schema["type"])[:40]}, not "object"'
    return None
