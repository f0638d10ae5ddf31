"""The transports a session can speak: stdio, streamable HTTP and the older HTTP+SSE, each capping what
one reply may hold and seeing only a :class:`TransportContext`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from .context import TransportContext
from .http import Try, current_try, streamable_http_transport
from .sse import sse_transport
from .stdio import stdio_transport

__all__ = ["TransportContext", "Try", "current_try", "open_transport"]


@asynccontextmanager
async def open_transport(context: TransportContext, kind: str) -> AsyncIterator[tuple[Any, Any]]:
    """The transport of ``kind`` for the context's server, as its ``(read_stream, write_stream)`` pair."""
    opener = {"stdio": stdio_transport, "sse": sse_transport}.get(kind, streamable_http_transport)
    async with opener(context, context.cap) as streams:
        yield streams
