"""One client for OpenAI-compatible chat endpoints: the judge, the eval policy, a simulated user.

One retry rule for all: a transport error, a timeout, 408, 409, 429 and 5xx are asked again after an
exponential back-off, or the server's ``Retry-After`` when it asks for longer (docs/runtime.md, "Chat client").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

import httpx

from .json_api import retry_after

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
"""Statuses worth asking again (any other 5xx too): rate limits and server-side trouble."""
BACKOFF_S = (1.0, 30.0)
"""Back-off before attempt ``n + 2``: ``min(1.0 * 2**n, 30.0)`` seconds, or longer when the server asks."""
MAX_REPLY_BYTES = 8 << 20
"""Longest response body read (counted decompressed): a completion is kilobytes, so this is room for
logprobs and verbose servers, while a server that sends without end cannot fill the process's memory."""


def chat_url(base_url: str, route: str = "chat/completions") -> str:
    """``{base_url}/{route}`` (default the chat completions); a query in ``base_url`` (``?api-version=...``)
    stays a query."""
    root = httpx.URL(base_url)
    return str(root.copy_with(path=root.path.rstrip("/") + "/" + route))


class ChatError(RuntimeError):
    """No completion: ``kind`` is ``transport`` (after the last attempt; ``timed_out`` says whether by the
    timeout), ``status`` (an error status, ``status`` and the body's ``text`` kept), ``too_large`` or
    ``not_json``. The message never holds the URL or a key."""

    def __init__(
        self, kind: str, message: str, *, status: int | None = None, text: str = "", timed_out: bool = False
    ):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.text = text
        self.timed_out = timed_out
        self.attempts = 0
        self.location = ""  # a redirect's target
        self.retry_after_s: float | None = None  # the server's Retry-After, read


class ChatClient:
    """``POST url`` with a JSON body, retried by the one rule, each attempt bounded as a whole by
    ``timeout_s`` (a server that trickles its answer too), the body by :data:`MAX_REPLY_BYTES`.

    Args:
        url: the full endpoint, e.g. ``http://host:8000/v1/chat/completions``.
        api_key: sent as a bearer token when given.
        timeout_s: seconds one attempt may take.
        retries: attempts after the first.
        connections: the connection pool's size.
        max_in_flight: attempts in flight at once (``None``: as many as the pool allows).
        on_attempt: called as each attempt starts (a judge counts its calls).
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        retries: int = 3,
        connections: int = 32,
        max_in_flight: int | None = None,
        on_attempt: Callable[[], None] | None = None,
    ):
        self.url = url
        self.timeout_s = timeout_s
        self.retries = retries
        self.latency_s: float | None = None  # of the latest answered attempt
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._connections = connections
        self._max_in_flight = max_in_flight
        self._on_attempt = on_attempt
        self._client: httpx.AsyncClient | None = None
        self._limit: asyncio.Semaphore | None = None

    async def complete(self, body: dict[str, Any]) -> Any:
        """The JSON an endpoint answered ``body`` with (status below 300); :class:`ChatError` otherwise."""
        if self._client is None:  # created on the running loop, which owns its connections
            limits = httpx.Limits(
                max_connections=self._connections, max_keepalive_connections=self._connections
            )
            self._client = httpx.AsyncClient(headers=self._headers, timeout=self.timeout_s, limits=limits)
            if self._max_in_flight is not None:
                self._limit = asyncio.Semaphore(self._max_in_flight)
        for attempt in range(self.retries + 1):
            try:
                return await self._attempt(body)
            except ChatError as error:
                error.attempts = attempt + 1
                retryable = error.kind == "transport" or (
                    error.kind == "status" and (error.status in RETRY_STATUS or (error.status or 0) >= 500)
                )
                if not retryable or attempt == self.retries:
                    raise
                backoff = min(BACKOFF_S[0] * 2**attempt, BACKOFF_S[1])
                await asyncio.sleep(max(backoff, error.retry_after_s or 0.0))
        raise AssertionError("unreachable")

    async def _attempt(self, body: dict[str, Any]) -> Any:
        assert self._client is not None
        async with self._limit if self._limit is not None else contextlib.nullcontext():
            if self._on_attempt is not None:
                self._on_attempt()
            t0 = time.perf_counter()
            try:
                async with (
                    asyncio.timeout(self.timeout_s),
                    self._client.stream("POST", self.url, json=body) as response,
                ):
                    data = await _read(response)
            except (httpx.TransportError, TimeoutError) as exc:
                timed_out = isinstance(exc, TimeoutError | httpx.TimeoutException)
                raise ChatError(
                    "transport", "timed out" if timed_out else type(exc).__name__, timed_out=timed_out
                ) from None
            latency = time.perf_counter() - t0
        text = data.decode("utf-8", "replace")
        if response.status_code >= 300:
            error = ChatError(
                "status", f"HTTP {response.status_code}", status=response.status_code, text=text
            )
            error.retry_after_s = retry_after(response.headers)
            error.location = response.headers.get("location", "")
            raise error
        try:
            answer = json.loads(data)
        except ValueError:
            raise ChatError("not_json", "not JSON", status=response.status_code, text=text) from None
        self.latency_s = latency
        return answer

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None


async def _read(response: httpx.Response) -> bytes:
    """The body of ``response``, or :class:`ChatError` (``too_large``) once it passes
    :data:`MAX_REPLY_BYTES`, counted decompressed (a small gzip body that inflates to gigabytes too)."""
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise ChatError(
                "too_large", f"the reply passed {MAX_REPLY_BYTES >> 20} MiB: not a chat completion"
            )
        chunks.append(chunk)
    return b"".join(chunks)
