"""One try of a tool call on one session: send it, read its result, and say what happened to the session
(it expired, it died under the call, it replied) in terms the healing (:mod:`.healing`) acts on."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, CallToolResult
from pydantic import ValidationError

from swift_rlfactory.redaction import redact

from ..base import ToolError, current_call
from ..observation import render
from .errors import OUTPUT_SCHEMA_FAULT, invalid, output_schema_fault
from .framing import too_large
from .transports import Try, current_try

if TYPE_CHECKING:
    from .session import Session

# What a dead transport looks like from a caller's side. The SDK mostly reports it as an MCPError with code
# CONNECTION_CLOSED; these are the raw forms that can escape before the session notices (a write to a dead
# pipe, a refused or dropped HTTP connection).
CONNECTION_ERRORS = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    OSError,
    httpx2.HTTPError,
)

# How a server says it no longer knows our session: the SDK's own 404 stand-in ("Session terminated"), the
# Python SDK server's "Session not found", and "No valid session ID" / "session expired" of other servers.
_SESSION_GONE = re.compile(
    r"session.*(not found|terminated|expired|invalid|unknown|no valid)|no valid session", re.I
)

# The SDK's words when one streamable-HTTP event outgrows ``max_sse_event_size`` (our result cap).
_EVENT_TOO_LARGE = re.compile(r"event exceeded the \d+ byte limit")


class Lost(Exception):
    """The transport under the try died (``dead``) or the server forgot the session (``expired``).

    ``sent_after_close``: the server had hung up before the call was sent (a stdio server killed between
    calls), so no server got it; ``marker`` is the try, marked ``refused`` if its HTTP request could not
    connect."""

    def __init__(self, cause: BaseException, expired: bool, marker: Try, sent_after_close: bool):
        super().__init__()
        self.cause, self.expired, self.marker, self.sent_after_close = (
            cause,
            expired,
            marker,
            sent_after_close,
        )


async def call_once(
    session: Session, client: ClientSession, name: str, arguments: dict[str, Any], *, call: object,
    repeat: bool, max_result_mb: float, on_unanswered: Any,
) -> Any:  # fmt: skip
    """One try of ``name`` on ``client`` of ``session``, counted in the session's calls in flight as
    ``call`` (the same object across the call's tries) while the server may be running it.

    ``repeat`` when an earlier try may have run the call, so that this one, once it is sent, marks the
    call's account ``repeated``. Raises :class:`Lost` when the session died or expired under the try,
    :class:`ToolError` for the server's error, and calls ``on_unanswered(session, client)`` for a try given
    up on (cancelled) before any reply.
    """
    hung_up = session.hung_up  # the server's end of this client's transport (set in the same step)
    account = current_call.get()
    marker = Try()
    sent_after_close = False
    try:
        # A server that closed the connection before the call goes out never gets it (a stdio server
        # killed between calls): the SDK's "Connection closed" then is no death under the call.
        sent_after_close = hung_up.is_set() or session.client is not client
        if repeat and account is not None and not sent_after_close:
            account.repeated = True
        if not sent_after_close:
            session.in_flight.add(call)
        sending = current_try.set(marker)
        try:
            result = await client.call_tool(name, arguments)
        finally:
            current_try.reset(sending)
    except asyncio.CancelledError:
        if call in session.in_flight:  # sent, and given up on before any reply
            on_unanswered(session, client)
        raise
    except MCPError as exc:
        _replied(session, client, exc.code != CONNECTION_CLOSED)
        raise _witnessed(session, client, _mcp_error(exc, marker, sent_after_close, max_result_mb)) from None
    except CONNECTION_ERRORS as exc:
        raise _witnessed(session, client, Lost(exc, False, marker, sent_after_close)) from None
    except ValidationError as exc:  # the reply arrived but is no CallToolResult (a block lacks a field)
        _replied(session, client)
        raise ToolError(f"the server's result is not valid MCP: {invalid(exc)}") from None
    except RuntimeError as exc:  # the SDK checked the result against the tool's outputSchema
        if not OUTPUT_SCHEMA_FAULT.match(str(exc)):
            raise
        _replied(session, client)
        raise ToolError(output_schema_fault(exc)) from None
    finally:
        session.in_flight.discard(call)
    _replied(session, client)
    return result_value(result)


def _replied(session: Session, client: ClientSession, replied: bool = True) -> None:
    """The server replied on ``client`` (if only with an error): count its unanswered calls afresh."""
    if replied and session.client is client:
        session.unanswered = 0


def _witnessed(session: Session, client: ClientSession, error: Exception) -> Exception:
    """``error``, having noted who was in flight on ``client`` when its first call found it dead."""
    if isinstance(error, Lost) and not error.expired and session.client is client:
        session.witnesses[client] = frozenset(session.in_flight)
    return error


def _mcp_error(exc: MCPError, marker: Try, sent_after_close: bool, max_result_mb: float) -> Exception:
    """What an ``MCPError`` from the SDK means for the call: its error, or a lost session."""
    if _EVENT_TOO_LARGE.search(exc.message or ""):  # the SDK abandons only this request
        return ToolError(too_large("the server's reply", max_result_mb))
    if exc.code == CONNECTION_CLOSED:
        return Lost(exc, False, marker, sent_after_close)
    if _SESSION_GONE.search(exc.message or ""):
        return Lost(exc, True, marker, sent_after_close)
    return ToolError(redact(exc.message))


def result_value(result: CallToolResult) -> Any:
    """A call's result as the executor renders it: its content blocks, or its structured content when the
    server sent only that (the value itself when that is ``{"result": value}``); an error result raises
    :class:`ToolError` with its text."""
    if result.is_error:
        message = render(result.content) or render(result.structured_content)
        raise ToolError(redact(message or "the tool reported an error without a message"))
    structured = result.structured_content
    if not result.content and structured is not None:
        # The Python SDK and FastMCP send a return value that is no object as {"result": value}, with
        # no text beside it when the value is empty (None, []): the model reads the value, as it reads
        # the text of a value that has some, not a wrapper it sees nowhere else.
        if isinstance(structured, dict) and structured.keys() == {"result"}:
            return structured["result"]
        return structured
    return list(result.content)
