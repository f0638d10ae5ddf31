"""Framing of a server's byte stream: capped newline-ended lines (stdio), capped SSE events, and lenient
parsing of each into a JSON-RPC message; a reply that cannot be read becomes an error reply for its request.
See docs/mcp.md, "Result cap" and "Framing"."""

from __future__ import annotations

import json
import logging
import re
from typing import Any, NamedTuple

import mcp_types
from mcp.shared.message import SessionMessage
from mcp.types import INTERNAL_ERROR, ErrorData, JSONRPCError

from swift_rlfactory.redaction import redact
from swift_rlfactory.runtime.json_api import sendable

logger = logging.getLogger(__package__)

_SNIFF_BYTES = 4096  # the head and tail of an oversized line kept to find its request id


class Oversized(NamedTuple):
    """A line or event dropped for outgrowing the cap: its size and its first and last few KB."""

    size: int
    head: bytes
    tail: bytes


class CappedLines:
    """Splits a byte stream into ``\\n``-ended lines, never holding more than ``cap`` bytes of one.

    A line over the cap is dropped as it arrives and comes out as :class:`Oversized`: only its first and
    last few KB are kept, to find the id of the request it answers (servers put ``"id"`` first, like the
    Python SDK, or last, like the TypeScript SDK), so that request fails at once with a clear error instead
    of waiting for its timeout. A ``\\r`` before the newline is removed (event streams end lines in CRLF).
    """

    def __init__(self, cap: int):
        self.cap = cap
        self._parts: list[bytes] = []
        self._size = 0
        self._head = b""
        self._tail = b""

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        """Lines completed by ``chunk``."""
        out: list[bytes | Oversized] = []
        while chunk:
            end = chunk.find(b"\n")
            piece, chunk = (chunk, b"") if end < 0 else (chunk[:end], chunk[end + 1 :])
            self._add(piece)
            if end >= 0:
                out.append(self._finish())
        return out

    def _add(self, piece: bytes) -> None:
        self._size += len(piece)
        if self._size <= self.cap:
            self._parts.append(piece)
            return
        if self._parts:  # just went over: keep the head and tail, drop the rest
            seen = b"".join(self._parts) + piece
            self._head, self._tail, self._parts = seen[:_SNIFF_BYTES], seen[-_SNIFF_BYTES:], []
        else:
            if len(self._head) < _SNIFF_BYTES:
                self._head += piece[: _SNIFF_BYTES - len(self._head)]
            self._tail = (self._tail + piece)[-_SNIFF_BYTES:]

    def _finish(self) -> bytes | Oversized:
        size, parts, head, tail = self._size, self._parts, self._head, self._tail
        self._size, self._parts, self._head, self._tail = 0, [], b"", b""
        if size <= self.cap:
            return b"".join(parts).removesuffix(b"\r")
        return Oversized(size, head, tail.removesuffix(b"\r"))


class LineReader:
    """A stdio server's stdout as JSON-RPC messages, one per line (see :class:`CappedLines`)."""

    def __init__(self, cap: int):
        self._lines = CappedLines(cap)

    def feed(self, chunk: bytes) -> list[SessionMessage | Exception]:
        """Messages completed by ``chunk`` (parse failures as exceptions, which the session logs)."""
        out: list[SessionMessage | Exception] = []
        for line in self._lines.feed(chunk):
            if isinstance(line, Oversized):
                out += oversized_reply(line, self._lines.cap)
            elif line.strip():
                out.append(parse_line(line))
        return out


class SseEvents:
    """An HTTP+SSE event stream as ``(event type, data)`` pairs, holding at most ``cap`` bytes of one event.

    The SDK's SSE client stops the whole stream at an event over 1 MiB, and with it the session and every
    call on it; here an event over the cap is dropped as it streams in and comes out as
    :class:`Oversized`, so only the request it answers fails. Comments (``: ping``) and fields other than
    ``event`` and ``data`` are skipped; several ``data`` lines are joined with newlines, as the standard says.
    """

    def __init__(self, cap: int):
        self._lines = CappedLines(cap)
        self._event = b"message"
        self._data: list[bytes] = []
        self._size = 0
        self._dropped: Oversized | None = None

    def feed(self, chunk: bytes) -> list[tuple[str, bytes | Oversized]]:
        """Events completed by ``chunk``."""
        out: list[tuple[str, bytes | Oversized]] = []
        for line in self._lines.feed(chunk):
            if isinstance(line, Oversized):  # a data line over the cap: keep what names its request
                self._size += line.size
                head = self._data[0] if self._data else line.head.partition(b":")[2].removeprefix(b" ")
                self._dropped, self._data = Oversized(self._size, head[:_SNIFF_BYTES], line.tail), []
            elif not line:
                if self._data or self._dropped is not None:
                    out.append(
                        (self._event.decode(errors="replace"), self._dropped or b"\n".join(self._data))
                    )
                self._event, self._data, self._size, self._dropped = b"message", [], 0, None
            elif not line.startswith(b":"):
                field, _, value = line.partition(b":")
                value = value.removeprefix(b" ")
                if field == b"event":
                    self._event = value
                elif field == b"data":
                    self._add(value)
        return out

    def _add(self, value: bytes) -> None:
        self._size += len(value) + 1
        if self._dropped is not None:
            self._dropped = self._dropped._replace(size=self._size, tail=value[-_SNIFF_BYTES:])
        elif self._size > self._lines.cap:  # many data lines, together over the cap
            head = (self._data or [value])[0][:_SNIFF_BYTES]
            self._dropped, self._data = Oversized(self._size, head, value[-_SNIFF_BYTES:]), []
        else:
            self._data.append(value)


def oversized_reply(line: Oversized, cap: int) -> list[SessionMessage | Exception]:
    """An error reply for the request whose over-cap reply was dropped (none if its id is unreadable)."""
    message = too_large(f"the server's reply of {line.size / 2**20:.3g} MB", cap / 2**20)
    request_id = _sniff_id(line.head, line.tail)
    if request_id is None:
        logger.warning("MCP server sent a message too large: %s; no request id found in it, dropped", message)
        return []
    return [error_reply(request_id, message)]


def parse_line(line: bytes) -> SessionMessage | Exception:
    """One stdout line (or SSE event) as a JSON-RPC message; a reply that cannot be read becomes an error reply.

    The fast path is strict JSON in UTF-8, which every Python SDK server writes. Servers in other
    languages may write Latin-1 bytes or a lone surrogate escape (``"\\ud83d"``, half an emoji cut by a
    truncation), which strict parsers reject; those lines are decoded leniently, bad characters becoming
    U+FFFD, and parsed again. Text before the first ``{`` - a banner or progress bar printed without a
    newline (``Loading 100%\\r``) - is dropped with a warning showing it, and the message after it is read.
    A line that still is no message is answered with an error for the request whose id it carries, so the
    call fails now instead of waiting for its timeout; one without a readable id (a banner line, or a
    request from the server, not a reply) is logged as a warning and passed on as the exception.
    """
    adapter = mcp_types.jsonrpc_message_adapter
    try:
        return SessionMessage(adapter.validate_json(line, by_name=False))
    except ValueError:
        pass
    start = line.find(b"{")
    if start > 0 and not line.lstrip().startswith(b"["):  # not a JSON-RPC batch
        if line[:start].strip():
            logger.warning("MCP server wrote text before a message, dropped: %s", excerpt(line[:start]))
        line = line[start:]
    parsed: Any = None
    try:
        parsed = json.loads(line.decode("utf-8", "replace"))
        return SessionMessage(adapter.validate_python(sendable(parsed), by_name=False))
    except ValueError as exc:
        request_id = _sniff_id(line[:_SNIFF_BYTES], line[-_SNIFF_BYTES:])
        if request_id is None or (isinstance(parsed, dict) and "method" in parsed):
            logger.warning("MCP server wrote a line that is no JSON-RPC message, dropped: %s", excerpt(line))
            return exc
        reason = str(exc).splitlines()[0][:200]
        return error_reply(request_id, f"the server's reply is not a valid JSON-RPC message: {reason}")


def excerpt(text: bytes, limit: int = 200) -> str:
    """``text`` for a log line: decoded, redacted, cut to ``limit`` characters, control characters escaped.

    Redacted before the cut (a key split by the cut is no longer one redaction recognises), over the first
    64 KiB only: the line may be megabytes, and what redaction shortens cannot bring text from past 64 KiB
    into the first ``limit`` characters.
    """
    head = text[:65536]
    shown = redact(head.decode("utf-8", "replace"))
    return repr(shown[:limit] + ("..." if len(shown) > limit or len(text) > len(head) else ""))


_HEAD_ID = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_TAIL_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


def too_large(what: str, megabytes: float) -> str:
    """The error for a reply over the cap, saying what the cap counts."""
    return (
        f"{what} exceeds max_result_mb ({megabytes:g} MB, counted on the whole reply message; Python SDK "
        "servers send a text result twice, as content and as structuredContent)"
    )


def _sniff_id(head: bytes, tail: bytes) -> int | str | None:
    match = _HEAD_ID.search(head) or _TAIL_ID.search(tail)
    return json.loads(match.group(1)) if match else None


def error_reply(request_id: int | str, message: str, code: int = INTERNAL_ERROR) -> SessionMessage:
    error = ErrorData(code=code, message=message)
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
