"""A stdio MCP server's stderr, forwarded to ours with every secret redacted.

A server's stderr used to be our stderr itself, so a server that echoes its command line (a usage error
printing ``--api-key sk-...``) or dumps its environment on a crash wrote the secrets of our config into our
logs. Now it is a pipe that :func:`forward_stderr` reads and writes on, redacted (:func:`..secrets.redact`),
a line at a time: the text still appears where it did, before the "its stderr, above, may say why" message
that follows a crash, only without the keys.

The forwarder must never hold the server up: it reads until the pipe ends whatever happens to the writing
(a closed or broken stderr of ours loses the text, not the server), and a line that never ends (1 MB of
progress bar without a newline) is passed on in pieces of :data:`CHUNK_CHARS`, cut where no recorded secret
spans the cut (:func:`..secrets.safe_cut`), so memory stays bounded. Bytes that are not UTF-8 are shown as
U+FFFD; a last line without a newline is passed on when the pipe ends.
"""

from __future__ import annotations

import codecs
from contextlib import suppress
from typing import TextIO

import anyio
from anyio.abc import ByteReceiveStream

from ..secrets import redact, safe_cut

CHUNK_CHARS = 65536
"""The most characters of one unfinished line held before a piece of it is passed on."""


class RedactedLines:
    """Bytes in, redacted text out: whole lines as they complete, a piece of an overlong one at the cap."""

    def __init__(self, cap: int = CHUNK_CHARS):
        self.cap = cap
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""

    def feed(self, chunk: bytes) -> str:
        """The redacted text that ``chunk`` completes (possibly none)."""
        self._pending += self._decoder.decode(chunk)
        end = self._pending.rfind("\n") + 1
        if not end and len(self._pending) >= self.cap:
            end = safe_cut(self._pending, len(self._pending) // 2)
        out, self._pending = self._pending[:end], self._pending[end:]
        return redact(out) if out else ""

    def finish(self) -> str:
        """What is left when the stream ends, as a last line (a newline added if it had none)."""
        rest, self._pending = self._pending + self._decoder.decode(b"", final=True), ""
        return redact(rest) + ("" if not rest or rest.endswith("\n") else "\n")


async def forward_stderr(stream: ByteReceiveStream, sink: TextIO, done: anyio.Event) -> None:
    """Copy ``stream`` to ``sink`` redacted until the stream ends or is closed, then set ``done``."""
    lines = RedactedLines()
    try:
        with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for chunk in stream:
                _write(sink, lines.feed(chunk))
        _write(sink, lines.finish())
    finally:
        done.set()


def _write(sink: TextIO, text: str) -> None:
    """Write and flush ``text``; a failure loses it (our stderr closed or broken), never the reading."""
    if text:
        with suppress(OSError, ValueError):
            sink.write(text)
            sink.flush()
