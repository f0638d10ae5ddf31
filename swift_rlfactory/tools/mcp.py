"""MCP servers as tool providers: stdio subprocesses and remote SSE / streamable-HTTP endpoints.

Each entry of ``mcpServers`` becomes one :class:`McpProvider`. On :meth:`~McpProvider.start` it opens
``sessions`` client sessions (for a stdio server, that many server processes), lists the server's tools and
hands them to the executor with the server's own names, descriptions and input schemas. A call goes to the
live session with the fewest calls in flight, which spreads the load evenly over server processes (one
Python process runs CPU-bound tools one at a time, whatever the number of requests it accepts).

A training run lasts hours, and servers crash, get OOM-killed or drop connections. When a session's
transport dies, the call that noticed raises :class:`~.base.TransportError` (which the executor retries),
the session is marked dead so no other call is sent to it, and it is reopened in the background; the retry
lands on a live session or waits for the reopened one.

Every session is owned by one long-lived task. The SDK's transports and ``ClientSession`` are anyio
context managers that must be entered and exited by the same task, so the owner enters them, publishes the
initialized session, and sleeps until told to stop; closing or restarting a session means stopping its
owner and, for a restart, starting a new one. Calls run in the executor's tasks and only borrow the session.
All of it runs on the executor's private loop (see :mod:`.loop`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TextIO

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, PaginatedRequestParams

from .base import Tool, ToolError, ToolSpec, TransportError
from .mcp_config import McpConfig, McpServerConfig
from .observation import render

logger = logging.getLogger(__name__)

# What a dead transport looks like from a caller's side. The SDK mostly reports it as an MCPError with code
# CONNECTION_CLOSED; these are the raw forms that can escape before the session notices (a write to a dead
# pipe, a refused or dropped HTTP connection).
_CONNECTION_ERRORS = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    OSError,
    httpx2.HTTPError,
)

# Closing a stdio session closes the server's stdin, waits 2 s, then SIGTERMs and SIGKILLs it (SDK policy);
# beyond this the owner task is cancelled and abandoned so that close() never hangs.
_CLOSE_TIMEOUT_S = 10.0


def mcp_providers(config: McpConfig) -> list[McpProvider]:
    """One provider per entry of ``mcpServers``, in file order."""
    return [McpProvider(name, server) for name, server in config.mcpServers.items()]


class McpTool:
    """One tool of an MCP server; calls go through the provider's least-loaded live session."""

    def __init__(self, provider: McpProvider, spec: ToolSpec):
        self.provider = provider
        self.spec = spec

    async def call(self, arguments: dict[str, Any]) -> Any:
        """Call the tool on the server; see :meth:`McpProvider.call_tool`."""
        return await self.provider.call_tool(self.spec.name, arguments)


class McpProvider:
    """Tools of one MCP server, reached through ``config.sessions`` parallel client sessions.

    Args:
        name: the server's key in ``mcpServers``; names it in errors and prefixes clashing tool names.
        config: how to start or reach the server (see :class:`~.mcp_config.McpServerConfig`).
    """

    def __init__(self, name: str, config: McpServerConfig):
        self.name = name
        self.config = config
        self._sessions: list[_Session] = []
        self._restarts: dict[_Session, asyncio.Task[None]] = {}
        self._closed = False

    async def start(self) -> list[Tool]:
        """Open every session and list the server's tools; raises ``RuntimeError`` naming the server."""
        self._closed = False
        self._sessions = [_Session(f"{self.name}#{i}", self.config) for i in range(self.config.sessions)]
        try:
            await asyncio.gather(*(session.open() for session in self._sessions))
        except Exception as exc:
            await self.close()
            where = _endpoint(self.config)
            raise RuntimeError(
                f"MCP server {self.name!r} ({where}) failed to start: {_describe(exc)}"
            ) from exc
        return [McpTool(self, spec) for spec in self._sessions[0].tools]

    async def close(self) -> None:
        """Stop every session (terminating stdio servers) and any pending restart; safe to call twice."""
        self._closed = True
        restarts = list(self._restarts.values())
        for task in restarts:
            task.cancel()
        await asyncio.gather(*restarts, return_exceptions=True)
        await asyncio.gather(*(session.close() for session in self._sessions), return_exceptions=True)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call ``name`` on the least-loaded live session.

        Returns the result's content blocks (rendered later by :func:`~.observation.render`), or its
        structured content when the server sent only that. Raises :class:`ToolError` when the server
        answered with an error and :class:`TransportError` when it could not be reached.
        """
        session, client = await self._pick()
        session.in_flight += 1
        try:
            result = await client.call_tool(name, arguments)
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise ToolError(exc.message) from exc
            self._lost(session, client, exc)
            raise TransportError(f"MCP server {self.name!r} closed the connection") from exc
        except _CONNECTION_ERRORS as exc:
            self._lost(session, client, exc)
            raise TransportError(f"MCP server {self.name!r} unreachable: {_describe(exc)}") from exc
        finally:
            session.in_flight -= 1
        if result.is_error:
            raise ToolError(render(result.content) or "the tool reported an error without a message")
        if not result.content and result.structured_content is not None:
            return result.structured_content
        return list(result.content)

    async def _pick(self) -> tuple[_Session, ClientSession]:
        """The live session with the fewest calls in flight; if none is live, wait for one to reopen.

        Dead sessions are reopened here too, which covers a transport that died on its own between calls.
        """
        if not self._closed:
            for session in self._sessions:
                if session.client is None:
                    self._restart_soon(session)
            if self._restarts and all(session.client is None for session in self._sessions):
                await asyncio.wait(list(self._restarts.values()), return_when=asyncio.FIRST_COMPLETED)
        live = [session for session in self._sessions if session.client is not None]
        if not live:
            errors = "; ".join(_describe(s.error) for s in self._sessions if s.error is not None)
            raise TransportError(f"MCP server {self.name!r} is unavailable: {errors or 'closed'}")
        session = min(live, key=lambda s: s.in_flight)
        assert session.client is not None
        return session, session.client

    def _lost(self, session: _Session, client: ClientSession, exc: BaseException) -> None:
        """A call found ``client`` dead: stop routing to it and reopen its session, once per death."""
        if session.client is not client or self._closed:
            return  # an earlier call already reported this death, or we are shutting down
        logger.warning("MCP server %r: session %s lost (%s); restarting it", self.name, session.label, exc)
        session.client = None
        self._restart_soon(session)

    def _restart_soon(self, session: _Session) -> None:
        if session not in self._restarts:
            task = asyncio.create_task(session.restart(), name=f"mcp-restart-{session.label}")
            self._restarts[session] = task
            task.add_done_callback(lambda _: self._restarts.pop(session, None))


class _Session:
    """One client session to the server and the task that owns its context managers."""

    def __init__(self, label: str, config: McpServerConfig):
        self.label = label
        self.config = config
        self.client: ClientSession | None = None
        self.tools: list[ToolSpec] = []
        self.in_flight = 0
        self.error: BaseException | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def open(self) -> ClientSession:
        """Start an owner task; wait until its session is initialized and has listed the server's tools."""
        ready, self._stop = asyncio.Event(), asyncio.Event()
        self.error = None
        self._owner = asyncio.create_task(self._own(ready, self._stop), name=f"mcp-session-{self.label}")
        try:
            await asyncio.wait_for(ready.wait(), self.config.startup_timeout_s)
        except TimeoutError:
            await self.close()
            self.error = TimeoutError(f"no MCP handshake within {self.config.startup_timeout_s:g} s")
        if self.client is None:
            raise self.error or ConnectionError("the session closed while starting")
        return self.client

    async def close(self) -> None:
        """Stop the owner task: it leaves the SDK contexts, which ends a stdio server process."""
        owner, self._owner = self._owner, None
        if owner is None:
            return
        self._stop.set()
        if self.client is None:
            # Still starting (it looks at the stop event only once initialized) or already dead: nothing to
            # finish gracefully. The SDK's stdio teardown is shielded, so a cancelled owner still ends the process.
            owner.cancel()
        done, _ = await asyncio.wait({owner}, timeout=_CLOSE_TIMEOUT_S)
        if not done:
            owner.cancel()
            done, _ = await asyncio.wait({owner}, timeout=_CLOSE_TIMEOUT_S)
            if not done:
                logger.warning("MCP session %s did not shut down; abandoning it", self.label)

    async def restart(self) -> None:
        """Close the old session and open a new one; a failure is kept in ``error`` for the next caller."""
        await self.close()
        try:
            await self.open()
        except Exception as exc:
            logger.warning("MCP session %s could not restart: %s", self.label, _describe(exc))

    async def _own(self, ready: asyncio.Event, stop: asyncio.Event) -> None:
        client: ClientSession | None = None
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(_transport(self.config))
                client = await stack.enter_async_context(ClientSession(read, write))
                await client.initialize()
                # Listing on every session, not just the first, also primes the SDK's per-session cache of
                # output schemas; unprimed, the first concurrent calls would each list the tools again.
                self.tools = await _list_tools(client)
                self.client = client
                ready.set()
                await stop.wait()
        except Exception as exc:  # recorded for open() and _pick(), which report it with the server's name
            self.error = exc
        finally:
            if self.client is client:
                self.client = None
            ready.set()


@asynccontextmanager
async def _transport(config: McpServerConfig) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK transport for ``config``, as its ``(read_stream, write_stream)`` pair."""
    if config.kind == "stdio":
        assert config.command is not None
        params = StdioServerParameters(
            command=sys.executable if config.command in ("python", "python3") else config.command,
            args=config.args,
            env={**os.environ, **config.env},
            cwd=config.cwd,
        )
        async with stdio_client(params, errlog=_server_stderr()) as streams:
            yield streams
    elif config.kind == "sse":
        assert config.url is not None
        async with sse_client(config.url, headers=config.headers) as streams:
            yield streams
    else:
        assert config.url is not None
        # The SDK's defaults: a short connect timeout, a long read timeout for the server's event stream.
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with (
            httpx2.AsyncClient(headers=config.headers, timeout=timeout) as http,
            streamable_http_client(config.url, http_client=http) as streams,
        ):
            yield streams


async def _list_tools(client: ClientSession) -> list[ToolSpec]:
    """Every tool the server offers, following pagination cursors."""
    specs: list[ToolSpec] = []
    cursor: str | None = None
    while True:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await client.list_tools(params=params)
        specs += [
            ToolSpec(name=t.name, description=t.description or t.title or "", parameters=t.input_schema)
            for t in page.tools
        ]
        cursor = page.next_cursor
        if not cursor:
            return specs


def _server_stderr() -> TextIO:
    """Where a stdio server's stderr goes: ours, or the process's own when ours is no real file (a notebook)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__
    return sys.stderr


def _describe(exc: BaseException) -> str:
    """A one-line cause, digging through the exception groups that anyio task groups raise."""
    leaves = getattr(exc, "exceptions", None)
    if leaves:
        # A transport failure arrives with the session's own "connection closed" beside it; the former says why.
        leaves = sorted(leaves, key=lambda e: isinstance(e, MCPError))
        return _describe(leaves[0])
    if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
        return "the server closed the connection (a stdio server's stderr, above, may say why)"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _endpoint(config: McpServerConfig) -> str:
    """The command line of a stdio server or the URL of a remote one, for error messages."""
    return shlex.join([config.command, *config.args]) if config.command else f"{config.kind} {config.url}"
