"""The streamable-HTTP transport (the SDK's client over our HTTP client), with JSON bodies capped at the
result cap, refused POSTs' status noted for their error replies, and a call's refused POST marked on its try."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client

from ..framing import too_large
from ..oauth import oauth_for
from .context import TransportContext


class Try:
    """One try of a call on a session; ``refused`` once an HTTP request sent for it could not connect.

    The SDK's streamable-HTTP client posts each request from its caller's context, so the try is found in
    :data:`current_try` by :class:`_HttpClient`. A refused connection is the one failure known to leave
    the server without the call: the SDK reports it only as the whole transport closing, like a server that
    died while running the call.
    """

    refused = False


current_try: ContextVar[Try | None] = ContextVar("mcp_current_try", default=None)


class _HttpClient(httpx2.AsyncClient):
    """An HTTP client marking the :class:`Try` whose ``tools/call`` POST could not connect as refused.

    Only the call's own POST counts: the SDK may post other requests from the same context once the call
    has run (a ``tools/list`` to learn its output schema), and their refusal says nothing about the call.
    """

    async def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        try:
            return await super().send(request, **kwargs)
        except httpx2.ConnectError:
            attempt = current_try.get()
            if attempt is not None and _posted(request).get("method") == "tools/call":
                attempt.refused = True
            raise


@asynccontextmanager
async def streamable_http_transport(context: TransportContext, cap: int) -> AsyncIterator[tuple[Any, Any]]:
    """A streamable-HTTP server as a transport; events and JSON bodies over ``cap`` bytes fail their request."""
    config = context.config
    assert config.url is not None
    # The SDK's defaults: a short connect timeout, a long read timeout for the server's event stream.
    timeout = httpx2.Timeout(30.0, read=300.0)

    async def note_status(response: httpx2.Response) -> None:
        if response.status_code >= 400 and response.request.method == "POST":
            request_id = _posted_id(response.request)
            if request_id is not None:  # a notification gets no error reply to name the status in
                status = f"HTTP {response.status_code} {response.reason_phrase}".strip()
                context.http_errors[request_id] = status

    hooks = {"response": [_cap_json_body(cap, config.max_result_mb), note_status]}
    async with (
        _HttpClient(
            headers=config.headers, auth=oauth_for(config), timeout=timeout, event_hooks=hooks, verify=_tls()
        ) as http,
        streamable_http_client(config.url, http_client=http, max_sse_event_size=cap) as streams,
    ):
        yield streams


@cache
def _tls() -> ssl.SSLContext:
    """The HTTP client's default TLS context, made once: loading the certificate store takes ~0.1 s of CPU,
    which a session opened per trajectory (``scope: trajectory``) would otherwise pay at each start."""
    return httpx2.create_ssl_context()


def _posted(request: httpx2.Request) -> dict[str, Any]:
    """The JSON-RPC message a POST carried (empty for an unreadable body or a batch)."""
    try:
        message = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return {}
    return message if isinstance(message, dict) else {}


def _posted_id(request: httpx2.Request) -> int | str | None:
    """The JSON-RPC id of the request a POST carried (``None`` for a notification or an unreadable body)."""
    request_id = _posted(request).get("id")
    return request_id if isinstance(request_id, int | str) else None


def _cap_json_body(cap: int, megabytes: float) -> Any:
    """A response hook capping JSON bodies (servers in ``json_response`` mode) at ``cap`` bytes.

    The SDK caps event-stream events itself (``max_sse_event_size``) but reads a JSON body whole; past the
    cap this stream stops reading and raises ``StreamError``, which the SDK turns into an error reply for
    that one request. Event streams (the session's long-lived GET included) are left alone.
    """

    async def hook(response: httpx2.Response) -> None:
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            response.stream = _CappedStream(response.stream, cap, megabytes)

    return hook


class _CappedStream(httpx2.AsyncByteStream):
    """A response body that raises ``StreamError`` instead of growing past ``cap`` bytes."""

    def __init__(self, inner: Any, cap: int, megabytes: float):
        self.inner, self.cap, self.megabytes = inner, cap, megabytes

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self.inner:
            size += len(chunk)
            if size > self.cap:
                raise httpx2.StreamError(too_large("the server's reply", self.megabytes))
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()
