"""The older HTTP+SSE transport (protocol 2024-11-05), read with capped events instead of the SDK's fixed
1 MiB limit, so one large result fails only its own request. See docs/mcp.md, "Transports"."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any
from urllib.parse import urljoin, urlparse

import anyio
import httpx2
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared._httpx_utils import request_within_origin, stream_within_origin
from mcp.shared.message import SessionMessage
from mcp.types import CONNECTION_CLOSED, INTERNAL_ERROR

from swift_rlfactory.redaction import redact

from ..errors import describe
from ..framing import Oversized, SseEvents, error_reply, oversized_reply, parse_line
from ..oauth import oauth_for
from .context import TransportContext

logger = logging.getLogger("swift_rlfactory.tools.mcp")

_SSE_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-store"}


class _SseLink:
    """One open event stream: reads its events into the session, POSTs the session's messages."""

    def __init__(
        self,
        context: TransportContext,
        http: httpx2.AsyncClient,
        to_session: MemoryObjectSendStream[SessionMessage | Exception],
        cap: int,
    ):
        assert context.config.url is not None
        self.label, self.url, self.http, self.to_session, self.cap = (
            context.label,
            context.config.url,
            http,
            to_session,
            cap,
        )

    async def read_events(
        self, response: httpx2.Response, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Pass the stream's messages on; the first ``endpoint`` event names where to POST (same origin)."""
        events, started = SseEvents(self.cap), False
        async with self.to_session:
            with suppress(httpx2.TransportError, anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for chunk in response.aiter_bytes():
                    for event, data in events.feed(chunk):
                        if event == "endpoint" and isinstance(data, bytes) and not started:
                            task_status.started(self._endpoint(data))
                            started = True
                        elif event == "message":
                            await self._pass_on(data)
        if not started:
            raise ConnectionError("the event stream ended before the server named its message endpoint")

    def _endpoint(self, data: bytes) -> str:
        endpoint = urljoin(self.url, data.decode(errors="replace").strip())
        if urlparse(endpoint)[:2] != urlparse(self.url)[:2]:
            raise ConnectionError(f"the server's message endpoint is on another origin: {endpoint}")
        return endpoint

    async def _pass_on(self, data: bytes | Oversized) -> None:
        messages = oversized_reply(data, self.cap) if isinstance(data, Oversized) else [parse_line(data)]
        for message in messages:
            await self.to_session.send(message)

    async def post(self, endpoint: str, message: SessionMessage) -> None:
        """POST one message; a refusal or failure becomes its request's error reply (or a warning)."""
        request_id = getattr(message.message, "id", None)
        try:
            body = message.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
            response = await request_within_origin(self.http, "POST", endpoint, json=body)
            response.raise_for_status()
            return
        except httpx2.HTTPStatusError as exc:
            status = f"HTTP {exc.response.status_code} {exc.response.reason_phrase}".strip()
            gone = "session not found: " if exc.response.status_code == 404 else ""
            reason, code = f"{gone}{status} to the message POST: {exc.response.text[:200]}", INTERNAL_ERROR
        except httpx2.TransportError as exc:
            reason, code = f"the message POST failed: {describe(exc)}", CONNECTION_CLOSED
        except ValueError as exc:  # unserialisable: fail this request, not the session
            reason, code = f"cannot send the call: {exc}", INTERNAL_ERROR
        if request_id is None:
            logger.warning("MCP session %s: a notification was not delivered: %s", self.label, redact(reason))
        else:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self.to_session.send(error_reply(request_id, reason, code))

    async def write_messages(self, endpoint: str, from_session: Any, tg: TaskGroup) -> None:
        async with from_session:
            async for message in from_session:
                tg.start_soon(self.post, endpoint, message)  # concurrent POSTs, as the SDK sends them


@asynccontextmanager
async def sse_transport(context: TransportContext, cap: int) -> AsyncIterator[tuple[Any, Any]]:
    """An HTTP+SSE (2024-11-05) server as a transport, with events capped at ``cap`` bytes.

    One GET event stream whose first ``endpoint`` event names where messages are POSTed (on the same
    origin), redirects followed only within the origin, as the SDK's ``sse_client`` does. A POST the server
    refuses fails its request at once (a 404, an unknown session after a restart, reopens it); a connection
    failure counts as a dead session, as a dropped event stream does.
    """
    config = context.config
    assert config.url is not None
    timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's defaults: the event stream is long-lived
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    async with (
        httpx2.AsyncClient(headers=config.headers, auth=oauth_for(config), timeout=timeout) as http,
        stream_within_origin(http, "GET", config.url, headers=_SSE_HEADERS) as response,
    ):
        response.raise_for_status()
        media = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media != "text/event-stream":
            raise ConnectionError(f"expected an event stream (text/event-stream), got {media or 'no type'!r}")
        link = _SseLink(context, http, to_session, cap)
        async with anyio.create_task_group() as tg:
            endpoint = await tg.start(link.read_events, response)
            tg.start_soon(link.write_messages, endpoint, from_session, tg)
            try:
                yield read_stream, write_stream
            finally:
                read_stream.close()
                write_stream.close()
                tg.cancel_scope.cancel()
