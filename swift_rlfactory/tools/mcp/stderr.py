"""A stdio MCP server's stderr, forwarded to ours a line at a time with every secret redacted, never
holding the server or the event loop up. See docs/mcp.md, "Server stderr"."""

from __future__ import annotations

import codecs
import threading
from collections import deque
from contextlib import suppress
from typing import TextIO

import anyio
from anyio.abc import ByteReceiveStream

from swift_rlfactory.redaction import redact, safe_cut_before

CHUNK_CHARS = 65536
"""The most characters of one unfinished line held before a piece of it is passed on."""

HELD_CHARS = 1 << 20
"""The most characters of one server's stderr waiting for ours; past it its lines are dropped, and counted."""


class RedactedLines:
    """Bytes in, redacted text out: whole lines as they complete, a piece of an overlong one at the cap.

    A line end is no safe cut by itself: a secret can hold one (a PEM key read with ``${file:...}``), and a
    read can end inside that secret after it. Text is passed on up to the last line end that no recorded
    secret spans, whole or begun at the end of what has been read (:func:`swift_rlfactory.redaction.safe_cut_before`).
    """

    def __init__(self, cap: int = CHUNK_CHARS):
        self.cap = cap
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""

    def feed(self, chunk: bytes) -> str:
        """The redacted text that ``chunk`` completes (possibly none)."""
        self._pending += self._decoder.decode(chunk)
        end = self._pending.rfind("\n") + 1
        while end and (safe := safe_cut_before(self._pending, end)) < end:
            end = self._pending.rfind("\n", 0, safe) + 1
        if not end and len(self._pending) >= self.cap:
            end = safe_cut_before(self._pending, len(self._pending) // 2)
        out, self._pending = self._pending[:end], self._pending[end:]
        return redact(out) if out else ""

    def finish(self) -> str:
        """What is left when the stream ends, as a last line (a newline added if it had none)."""
        rest, self._pending = self._pending + self._decoder.decode(b"", final=True), ""
        return redact(rest) + ("" if not rest or rest.endswith("\n") else "\n")


class _Writer:
    """Writes text to ``sink`` on a thread of its own, so that a sink that blocks (a pipe nobody reads, a
    frozen terminal) holds up neither the event loop, and with it every tool call on it, nor the server.

    At most ``limit`` characters wait; past that, what comes is dropped until all that waited is written,
    then one line says how many lines were lost.
    """

    def __init__(self, sink: TextIO, name: str, limit: int):
        self.name = name
        self.done = threading.Event()
        self._sink = sink
        self._limit = limit
        self._ready = threading.Condition()
        self._queue: deque[str] = deque()
        self._held = 0
        self._dropped = 0
        self._closed = False
        threading.Thread(target=self._run, name=f"mcp-stderr-{name}", daemon=True).start()

    def put(self, text: str) -> None:
        """Queue ``text`` for the sink, or drop it (counted) if the sink is behind; never waits."""
        if not text:
            return
        with self._ready:
            if (self._dropped and self._held) or self._held + len(text) > self._limit:
                self._dropped += text.count("\n") or 1
                return
            self._queue.append(self._dropped_note() + text)
            self._held += len(self._queue[-1])
            self._ready.notify()

    def close(self) -> None:
        """Take no more text; the thread ends once it has written what waits (``done`` is then set)."""
        with self._ready:
            if not self._closed:
                self._queue.append(self._dropped_note())  # counted in no limit: the queue takes no more
                self._held += len(self._queue[-1])
                self._closed = True
                self._ready.notify()

    def _dropped_note(self) -> str:
        """The line that says how many lines were dropped since the last one (none if none were)."""
        dropped, self._dropped = self._dropped, 0
        if not dropped:
            return ""
        return f"[MCP server {self.name}: {dropped} lines of its stderr dropped, ours was not keeping up]\n"

    def _run(self) -> None:
        """Write what waits, all of it at once, until closed and written out; then set ``done``."""
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:
                    break
                text = "".join(self._queue)
                self._queue.clear()
            _write(self._sink, text)
            with self._ready:
                self._held -= len(text)
        self.done.set()


async def forward_stderr(stream: ByteReceiveStream, sink: TextIO, done: anyio.Event, name: str) -> None:
    """Copy ``stream`` (the stderr of the server ``name``) to ``sink`` redacted until the stream ends or is
    closed, then set ``done`` once what was read has been written (or the wait for it is cancelled)."""
    lines = RedactedLines()
    writer = _Writer(sink, name, HELD_CHARS)
    try:
        with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for chunk in stream:
                writer.put(lines.feed(chunk))
        writer.put(lines.finish())
        writer.close()
        # Polled: a thread cannot set an anyio event without a loop that is sure to outlive it.
        while not writer.done.is_set():
            await anyio.sleep(0.01)
    finally:
        writer.close()
        done.set()


def _write(sink: TextIO, text: str) -> None:
    """Write and flush ``text``; a failure loses it (our stderr closed or broken), never the reading."""
    if text:
        with suppress(OSError, ValueError):
            sink.write(text)
            sink.flush()
