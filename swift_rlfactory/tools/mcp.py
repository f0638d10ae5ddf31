"""MCP servers as tool providers: stdio subprocesses and remote streamable-HTTP / SSE endpoints.

Each entry of ``mcpServers`` becomes one :class:`McpProvider`. On :meth:`~McpProvider.start` it opens
``sessions`` client sessions (for a stdio server, that many server processes), lists the server's tools and
hands them to the executor with the server's own names, descriptions and input schemas. A call goes to the
live session with the fewest calls in flight, which spreads the load evenly over server processes (one
Python process runs CPU-bound tools one at a time, whatever the number of requests it accepts). One
provider serves every trajectory its process runs, all of a batch at once: what a server remembers between
calls is shared by all those episodes, and two calls of one episode may reach different server processes.
There is no per-episode server; a stateful tool should take what names its state as an argument.

A server may change its tools while it runs (FastMCP's ``tool.enable()``, a tool that unlocks another) and
say so with ``notifications/tools/list_changed``. The tools the model is shown stay those listed at start:
the system prompt of every trajectory was rendered from them, and a tool list that changed under a batch
would make the prompts of one step disagree. What the server offers *now* decides where calls go, though.
On the notification the session lists its tools again, in a task of its own (the session's receive loop
never waits for it; a call to this server waits that one round trip rather than be routed by a list the
server said is stale), and each session keeps its own list: every stdio process has its own, and a tool
one process enabled is on that process only. A call goes only to a session that lists its tool; a tool
the server no longer lists anywhere fails with "MCP server X no longer offers tool Y" instead of the
server's "Unknown tool". A tool the server began to offer later is not in the prompt, but the model may
learn of it (from the tool that enabled it), and a call to that name works (:meth:`McpProvider.late_tool`,
which the :class:`~.toolset.ToolSet` asks for a name none of its tools has) if the server entry's tool
filters let it through.

A training run lasts hours, and servers crash, get OOM-killed, restart under a load balancer or forget idle
sessions. The provider heals all of these itself, inside the call, and records every extra try on the
call's account (:data:`~.base.current_call`):

* **Session expired** (a streamable-HTTP server answers ``Session not found`` / HTTP 404 after a restart):
  the server did not run the call, so the session is reopened and the call sent again.
* **Session died** (a stdio server exited, a connection dropped): every call in flight on it is re-run,
  without using up the executor's retries, and marked ``repeated`` once a re-run is sent (the server may
  have run it before dying). A re-run that finds no session to send it on (a remote server that is down)
  repeats nothing: the call fails as unreachable, marked ``repeated`` only if a later try reaches a server.
  Nor does a call sent on a session whose server had already hung up (a stdio server killed between calls,
  its stdout closed): no server got it, so its re-run on the restarted server is its first run.
  Re-runs after a death go one at a time, each alone on a session ("solo"), so a *poison call* - one whose
  arguments crash the server - cannot take innocent calls down with it twice. A call that crashed the
  server twice while it was the only call there is not tried again: it becomes an error observation.
* **Session hung** (the server is alive but answers nothing: its event loop is blocked by a deadlock or a
  stuck native call): once :data:`HUNG_AFTER_TIMEOUTS` calls in a row were given up on (timed out) with no
  reply from the session in between, the session is pinged; a ping unanswered within
  :data:`PING_TIMEOUT_S` makes the session lost, and it is restarted (a stdio server's process group is
  ended) as after a crash. A server that answers the ping is only slow, and is left alone.
* **Unreachable** (a restart fails, the endpoint is down): :class:`~.base.TransportError`, which the
  executor retries with back-off; the next call tries to reopen the session again, so a server that comes
  back is used again.

Results are capped at the transport (``max_result_mb``): a stdio line, SSE event (on both HTTP transports)
or JSON body over the cap is skipped as it streams in, never held in memory, and only the call it answers
fails, with an error saying how large the reply was. The cap counts the server's whole reply message, the
bytes that must be read: Python SDK servers send a text result twice (as content and as structuredContent),
so with the default 32 MB a text result of up to about 16 MB passes. The observation is cut to
``max_output_tokens`` anyway; the cap only keeps a runaway result from holding memory and the session.
Arguments are sanitised before sending (a lone UTF-16 surrogate, which JSON cannot carry, becomes U+FFFD),
and so are a stdio server's replies (bytes that are not UTF-8 too); a reply that is no JSON at all fails its
call at once, and text a server prints on stdout before a message (a banner) is dropped with a warning.
Faults the SDK's validation would fail a whole reply for are mended first (:func:`_mended`): a tool listed
without ``inputSchema`` takes no arguments, one whose ``inputSchema`` is no object schema is dropped alone,
a content block of an unknown type becomes a short note, and an ``input_required`` result (protocol
2026-07-28: the server asks the user to fill in a form, or the client's model for a completion, before it
goes on) an error saying what it asked, which no one can give in a training run; a tool listed twice
counts once, a tool that runs only as an MCP task is left out (this client has no tasks), a server that
lists tools without declaring the tools capability is used all the same, and a ``tools/list`` that pages
in a loop fails start-up saying so.
Each of these is one warning naming the server, however many sessions it has.

Every session is owned by one long-lived task. The SDK's transports and ``ClientSession`` are anyio
context managers that must be entered and exited by the same task, so the owner enters them, publishes the
initialized session, and sleeps until told to stop; closing or restarting a session means stopping its
owner and, for a restart, starting a new one. Calls run in the executor's tasks and only borrow the session.
All of it runs on the executor's private loop (see :mod:`.loop`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from contextvars import ContextVar
from pathlib import Path
from typing import Any, NamedTuple, TextIO
from urllib.parse import urljoin, urlparse

import anyio
import httpx2
import mcp_types
from anyio.abc import Process
from mcp.client.session import ClientSession
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared._httpx_utils import request_within_origin, stream_within_origin
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCResponse,
    ListRootsResult,
    PaginatedRequestParams,
    Root,
    ToolListChangedNotification,
)
from pydantic import ValidationError

from swift_rlfactory.redaction import install_log_redaction, redact, remember_url
from swift_rlfactory.runtime.json_api import sendable

from .base import Tool, ToolError, ToolSpec, TransportError, current_call
from .mcp_config import PASSTHROUGH_ENV, PYTHON_COMMANDS, McpConfig, McpServerConfig
from .observation import render
from .server_stderr import forward_stderr

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

# How a server says it no longer knows our session: the SDK's own 404 stand-in ("Session terminated"), the
# Python SDK server's "Session not found", and "No valid session ID" / "session expired" of other servers.
_SESSION_GONE = re.compile(
    r"session.*(not found|terminated|expired|invalid|unknown|no valid)|no valid session", re.I
)

# The SDK's words when one streamable-HTTP event outgrows ``max_sse_event_size`` (our result cap).
_EVENT_TOO_LARGE = re.compile(r"event exceeded the \d+ byte limit")

# Closing a stdio session closes the server's stdin, waits 2 s, then SIGTERMs and SIGKILLs it (SDK policy);
# beyond this the owner task is cancelled and abandoned so that close() never hangs.
_CLOSE_TIMEOUT_S = 10.0
_EXIT_GRACE_S = 2.0

# Re-runs one call may need because of the server, not itself: sessions that died or expired under it.
_MAX_RERUNS = 4
_POISON_CRASHES = 2

HUNG_AFTER_TIMEOUTS = 3
"""Calls in a row given up on (timed out or cancelled) with no reply in between before a session is pinged."""
PING_TIMEOUT_S = 5.0
"""How long that ping may take before the session counts as hung and is restarted."""
RELIST_WAIT_S = 5.0
"""How long a call waits for the tool list its server said changed (``notifications/tools/list_changed``)
to be fetched again; past it, the call goes by the list as it was."""

_SNIFF_BYTES = 4096  # the head and tail of an oversized line kept to find its request id


def mcp_providers(config: McpConfig, workspace: Path | None = None) -> list[McpProvider]:
    """One provider per enabled entry of ``mcpServers``, in file order, each told its roots by
    :func:`_roots` (``workspace`` is the environment's folder; see :class:`McpProvider`)."""
    return [
        McpProvider(name, server, _roots(server, workspace))
        for name, server in config.mcpServers.items()
        if not server.disabled
    ]


def _roots(server: McpServerConfig, workspace: Path | None) -> list[Path]:
    """The folders a server is told of as its roots: those its entry's ``roots`` names, else the existing
    folders its command line names (relative ones from its ``cwd``, in order), else ``workspace``.

    ``server-filesystem /data/corpus``, as every client's README writes it, lets the client's roots
    *replace* the folders on its command line; told the environment's folder, it denied the model the
    folder the user named and opened the environment's own instead. Told the folders it was started on,
    it serves what the user wrote. Flags, files, paths that do not exist and arguments that are no path
    at all (a JSON setting longer than a file name may be) are no roots.
    """
    if server.roots is not None:
        return [Path(root) for root in server.roots]
    folders: list[Path] = []
    cwd = Path(server.cwd) if server.cwd else Path.cwd()
    for arg in server.args if server.command is not None else ():
        if arg.startswith("-"):
            continue
        try:
            path = (cwd / Path(arg).expanduser()).resolve()
            folder = path.is_dir()
        except (OSError, ValueError, RuntimeError):  # a name too long, a NUL byte, ~nobody: no folder
            continue
        if folder and path not in folders:
            folders.append(path)
    return folders or ([workspace] if workspace is not None else [])


class McpTool:
    """One tool of an MCP server; calls go through the provider's least-loaded live session.

    ``timeout_s`` is the server's ``timeout`` from its config (``None``: the run's ``call_timeout_s``).
    """

    def __init__(self, provider: McpProvider, spec: ToolSpec):
        self.provider = provider
        self.spec = spec
        self.timeout_s = provider.config.call_timeout_s

    async def call(self, arguments: dict[str, Any]) -> Any:
        """Call the tool on the server; see :meth:`McpProvider.call_tool`."""
        return await self.provider.call_tool(self.spec.name, arguments)


class _SessionExpired(Exception):
    """The server no longer knows the session; it did not run the call."""


class _Try:
    """One try of a call on a session; ``refused`` once an HTTP request sent for it could not connect.

    The SDK's streamable-HTTP client posts each request from its caller's context, so the try is found in
    :data:`_current_try` by :class:`_HttpClient`. A refused connection is the one failure known to leave
    the server without the call: the SDK reports it only as the whole transport closing, like a server that
    died while running the call.
    """

    refused = False


_current_try: ContextVar[_Try | None] = ContextVar("mcp_current_try", default=None)


class _HttpClient(httpx2.AsyncClient):
    """An HTTP client marking the :class:`_Try` whose ``tools/call`` POST could not connect as refused.

    Only the call's own POST counts: the SDK may post other requests from the same context once the call
    has run (a ``tools/list`` to learn its output schema), and their refusal says nothing about the call.
    """

    async def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        try:
            return await super().send(request, **kwargs)
        except httpx2.ConnectError:
            attempt = _current_try.get()
            if attempt is not None and _posted(request).get("method") == "tools/call":
                attempt.refused = True
            raise


class _SessionDied(Exception):
    """The session's transport died under the call; ``alone`` if no other call was there, ``delivered``
    unless the server had closed the connection before the call was sent (then no server got it)."""

    def __init__(self, alone: bool, delivered: bool):
        super().__init__()
        self.alone = alone
        self.delivered = delivered


class McpProvider:
    """Tools of one MCP server, reached through ``config.sessions`` parallel client sessions.

    Args:
        name: the server's key in ``mcpServers``; names it in errors and prefixes clashing tool names.
        config: how to start or reach the server (see :class:`~.mcp_config.McpServerConfig`).
        roots: folders the client advertises as MCP *roots* and lists when the server asks (``roots/list``),
            as an editor offers its workspace folder: server-filesystem started without a folder argument
            waits for them, and denies every access until it has some. None: no roots capability.
    """

    def __init__(self, name: str, config: McpServerConfig, roots: Sequence[Path] = ()):
        self.name = name
        self.config = config
        self.roots = tuple(Path(root).resolve() for root in roots)
        self._sessions: list[_Session] = []
        self._restarts: dict[_Session, asyncio.Task[None]] = {}
        self._probes: dict[_Session, asyncio.Task[None]] = {}
        self._solo = asyncio.Lock()
        self._closed = False
        self._shown: frozenset[str] = frozenset()

    async def start(self) -> list[Tool]:
        """Open every session and list the server's tools; raises ``RuntimeError`` naming the server."""
        install_log_redaction()
        self._closed = False
        self._solo = asyncio.Lock()  # bound to the running loop
        try:
            self.config.check_startable()
        except ValueError as exc:
            raise RuntimeError(redact(f"MCP server {self.name!r} cannot start: {exc}")) from None
        self._sessions = [
            _Session(f"{self.name}#{i}", self.config, self.roots) for i in range(self.config.sessions)
        ]
        try:
            await asyncio.gather(*(session.open() for session in self._sessions))
        except Exception as exc:
            await self.close()
            where, why = _endpoint(self.config), _describe(exc, stdio=self.config.kind == "stdio")
            raise RuntimeError(redact(f"MCP server {self.name!r} ({where}) failed to start: {why}")) from None
        for note in self._sessions[0].notes:  # every session lists the same tools: say it once
            logger.warning("MCP server %r: %s", self.name, note)
        offered = list(self._sessions[0].tools.values())
        try:
            kept = set(self.config.select_tools([spec.name for spec in offered]))
        except ValueError as exc:  # a filter naming a tool that is not there: fail now, naming the field
            await self.close()
            raise RuntimeError(f"MCP server {self.name!r}: {exc}") from None
        self._shown = frozenset(kept)
        return [McpTool(self, spec) for spec in offered if spec.name in kept]

    async def late_tool(self, name: str) -> Tool | None:
        """Tool ``name`` if the server began to offer it after start-up (it sent
        ``notifications/tools/list_changed``) on a live session and the config's filters let it through;
        else ``None``. A tool listing being fetched again is waited for (at most :data:`RELIST_WAIT_S`)."""
        if name in self._shown or not self.config.allows_tool(name):
            return None
        await self._relisted()
        for session in self._sessions:
            spec = session.tools.get(name) if session.client is not None else None
            if spec is not None:
                return McpTool(self, spec)
        return None

    async def _relisted(self) -> None:
        """Wait, at most :data:`RELIST_WAIT_S`, for the tool listings being fetched again."""
        pending = [s.relisting for s in self._sessions if s.relisting is not None and not s.relisting.done()]
        if pending:
            await asyncio.wait(pending, timeout=RELIST_WAIT_S)

    async def close(self) -> None:
        """Stop every session (terminating stdio servers) and any pending restart; safe to call twice."""
        self._closed = True
        restarts = [*self._restarts.values(), *self._probes.values()]
        for task in restarts:
            task.cancel()
        await asyncio.gather(*restarts, return_exceptions=True)
        await asyncio.gather(*(session.close() for session in self._sessions), return_exceptions=True)

    @property
    def pids(self) -> list[int]:
        """Process ids of the live stdio server processes (empty for remote servers)."""
        return [s.pid for s in self._sessions if s.pid is not None]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call ``name`` on the least-loaded live session, healing expired and dead sessions on the way.

        Returns the result's content blocks (rendered later by :func:`~.observation.render`), or its
        structured content when the server sent only that (the value itself when that is ``{"result":
        value}``, how SDK and FastMCP servers wrap a value that is no object). Raises :class:`ToolError` when the server
        answered with an error (or the call crashed the server twice by itself) and
        :class:`TransportError` when the server could not be reached.
        """
        arguments = sendable(arguments)
        account = current_call.get()
        crashes = reruns = 0
        solo = may_have_run = False
        while True:
            try:
                if solo:
                    async with self._solo:
                        return await self._call_once(name, arguments, solo=True, repeat=may_have_run)
                return await self._call_once(name, arguments, solo=False, repeat=may_have_run)
            except _SessionExpired:
                pass  # the server refused the call without running it
            except _SessionDied as death:
                if death.delivered:  # else it found a session that had died before: no run, no crash of its
                    crashes += death.alone
                    if crashes >= _POISON_CRASHES:
                        raise ToolError(
                            f"MCP server {self.name!r} crashed {crashes} times while running this call "
                            "alone; not retried (the arguments may crash the server)"
                        ) from None
                    may_have_run, solo = True, True
            except TransportError as down:  # no session opened: this try never left, an earlier one may have
                if may_have_run and not down.delivered:
                    raise TransportError(*down.args, delivered=True) from None
                raise
            reruns += 1
            if reruns > _MAX_RERUNS:
                raise TransportError(f"MCP server {self.name!r} lost {reruns} sessions under this call")
            if account is not None:
                account.attempts += 1

    async def _call_once(self, name: str, arguments: dict[str, Any], solo: bool, repeat: bool) -> Any:
        """One try on a live session; ``repeat`` when an earlier try may have run the call, so that this
        one, once it is sent, marks the call's account ``repeated`` (a try that finds no live session to send
        it on repeats nothing: the first call after a remote server went down is no repeat)."""
        session, client = await self._pick(name)
        hung_up = session.hung_up  # the server's end of this client's transport (set in the same step)
        account = current_call.get()
        marker = _Try()
        sent_after_close = False
        try:
            if solo:  # wait until the session is ours alone, holding back new calls meanwhile
                session.reserved = True
                while session.in_flight and session.client is client:
                    await asyncio.sleep(0.01)
            # A server that closed the connection before the call goes out never gets it (a stdio server
            # killed between calls): the SDK's "Connection closed" then is no death under the call.
            sent_after_close = hung_up.is_set() or session.client is not client
            if repeat and account is not None and not sent_after_close:
                account.repeated = True
            session.in_flight.add(marker)
            sending = _current_try.set(marker)
            try:
                result = await client.call_tool(name, arguments)
            finally:
                _current_try.reset(sending)
        except asyncio.CancelledError:
            if marker in session.in_flight:  # sent, and given up on before any reply
                self._unanswered(session, client)
            raise
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED and session.client is client:
                session.unanswered = 0  # the server replied, if only with an error
            if _EVENT_TOO_LARGE.search(exc.message or ""):  # the SDK abandons only this request
                raise ToolError(_too_large("the server's reply", self.config.max_result_mb)) from None
            if exc.code == CONNECTION_CLOSED:
                raise self._died(session, client, marker, exc, sent_after_close) from None
            if _SESSION_GONE.search(exc.message or ""):
                self._lost(session, client, exc)
                raise _SessionExpired from None
            raise ToolError(redact(exc.message)) from None
        except _CONNECTION_ERRORS as exc:
            raise self._died(session, client, marker, exc, sent_after_close) from None
        except ValidationError as exc:  # the reply arrived but is no CallToolResult (a block lacks a field)
            if session.client is client:
                session.unanswered = 0
            raise ToolError(f"the server's result is not valid MCP: {_invalid(exc)}") from None
        except RuntimeError as exc:  # the SDK checked the result against the tool's outputSchema
            if not _OUTPUT_SCHEMA_FAULT.match(str(exc)):
                raise
            if session.client is client:
                session.unanswered = 0
            raise ToolError(_output_schema_fault(exc)) from None
        finally:
            session.in_flight.discard(marker)
            if solo:
                session.reserved = False
        if session.client is client:
            session.unanswered = 0
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

    def _died(
        self,
        session: _Session,
        client: ClientSession,
        marker: _Try,
        exc: BaseException,
        sent_after_close: bool,
    ) -> _SessionDied:
        """The transport under ``client`` died: note who was in flight (once), reopen, say if we were alone
        and whether the call may have reached the server (not when it was sent after the server hung up, nor
        when its HTTP request was refused: a remote server that is down)."""
        if session.client is client:
            session.witnesses[client] = frozenset(session.in_flight)
        self._lost(session, client, exc)
        witnesses = session.witnesses.get(client, frozenset({marker}))
        return _SessionDied(alone=witnesses <= {marker}, delivered=not (sent_after_close or marker.refused))

    async def _pick(self, name: str) -> tuple[_Session, ClientSession]:
        """The live, unreserved session offering tool ``name`` with the fewest calls in flight; waits for a
        reopening one.

        Dead sessions are reopened here too, which covers a transport that died on its own between calls.
        Only sessions whose server lists ``name`` now are picked (each stdio process has its own tool list,
        which a server may change while it runs); when none does, the call fails saying the server no longer
        offers the tool, rather than with the server's "Unknown tool" or whatever else it makes of the call.
        A server that said its list changed is believed: while its list is fetched again, calls wait for it
        (one ``tools/list`` round trip, at most :data:`RELIST_WAIT_S`) instead of going by the old one.
        """
        relisted = False
        while True:
            if not self._closed:
                for session in self._sessions:
                    if session.client is None:
                        self._restart_soon(session)
                if self._restarts and all(session.client is None for session in self._sessions):
                    await asyncio.wait(list(self._restarts.values()), return_when=asyncio.FIRST_COMPLETED)
            live = [session for session in self._sessions if session.client is not None]
            if not live:
                errors = "; ".join(
                    _describe(s.error, stdio=self.config.kind == "stdio")
                    for s in self._sessions
                    if s.error is not None
                )
                raise TransportError(
                    redact(f"MCP server {self.name!r} is unavailable: {errors or 'closed'}"), delivered=False
                )
            if not relisted and any(s.relisting is not None and not s.relisting.done() for s in live):
                await self._relisted()  # the list the server just said is stale must not route the call
                relisted = True
                continue
            live = [session for session in live if name in session.tools]
            if not live:
                raise ToolError(
                    f"MCP server {self.name!r} no longer offers tool {name!r} (it changed its tool list "
                    "during the run)"
                )
            free = [session for session in live if not session.reserved]
            if free:
                session = min(free, key=lambda s: len(s.in_flight))
                assert session.client is not None
                return session, session.client
            await asyncio.sleep(0.02)  # every live session runs a solo re-run; they are short and rare

    def _unanswered(self, session: _Session, client: ClientSession) -> None:
        """A call on ``client`` was given up on unanswered; after too many in a row, check it is alive."""
        if session.client is not client or self._closed:
            return
        session.unanswered += 1
        if session.unanswered >= HUNG_AFTER_TIMEOUTS and session not in self._probes:
            task = asyncio.create_task(self._probe(session, client), name=f"mcp-probe-{session.label}")
            self._probes[session] = task
            task.add_done_callback(lambda _: self._probes.pop(session, None))

    async def _probe(self, session: _Session, client: ClientSession) -> None:
        """Ping ``client``: no answer within :data:`PING_TIMEOUT_S` means the server hangs; restart it."""
        unanswered = session.unanswered
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                await client.send_ping()
        except TimeoutError:
            hung = TimeoutError(
                f"{unanswered} calls in a row and a ping got no reply within {PING_TIMEOUT_S:g} s; "
                "the server hangs"
            )
            self._lost(session, client, hung)
        except Exception:  # a dead transport: the next call finds it and reopens it
            return
        else:
            if session.client is client:
                session.unanswered = 0  # alive, only slow: count afresh

    def _lost(self, session: _Session, client: ClientSession, exc: BaseException) -> None:
        """A call found ``client`` dead or forgotten: stop routing to it and reopen it, once per loss."""
        if session.client is not client or self._closed:
            return  # an earlier call already reported this loss, or we are shutting down
        logger.warning(
            "MCP server %r: session %s lost (%s); reopening it",
            self.name,
            session.label,
            _describe(exc, stdio=self.config.kind == "stdio"),
        )
        session.client = None
        self._restart_soon(session)

    def _restart_soon(self, session: _Session) -> None:
        if session not in self._restarts:
            task = asyncio.create_task(session.restart(), name=f"mcp-restart-{session.label}")
            self._restarts[session] = task
            task.add_done_callback(lambda _: self._restarts.pop(session, None))


class _Session:
    """One client session to the server and the task that owns its context managers."""

    def __init__(self, label: str, config: McpServerConfig, roots: tuple[Path, ...] = ()):
        self.label = label
        self.config = config
        self.roots = roots
        self.kind = config.kind  # "auto" becomes the transport that answered, for every reopen
        self.client: ClientSession | None = None
        self.hung_up = asyncio.Event()  # set once the server's messages to this client ended (EOF)
        self.tools: dict[str, ToolSpec] = {}  # what the server lists now, by name
        self.notes: list[str] = []  # what listing the tools mended or dropped, for one warning each
        self.relisting: asyncio.Task[None] | None = None  # fetching the tool list again, after list_changed
        self._relist_again = False  # the list changed again while it was being fetched
        self.in_flight: set[object] = set()
        self.reserved = False
        self.unanswered = 0  # calls in a row given up on before the current client replied to any
        self.witnesses: dict[ClientSession, frozenset[object]] = {}
        self.error: BaseException | None = None
        self.pid: int | None = None
        # "HTTP 401 Unauthorized" for each request whose POST was refused, until its error reply passes:
        # the SDK's own error ("Server returned an error response") omits the status.
        self.http_errors: dict[int | str, str] = {}
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def open(self) -> ClientSession:
        """Start an owner task; wait until its session is initialized and has listed the server's tools."""
        ready, self._stop = asyncio.Event(), asyncio.Event()
        self.error = None
        self.unanswered = 0
        self._owner = asyncio.create_task(self._own(ready, self._stop), name=f"mcp-session-{self.label}")
        try:
            await asyncio.wait_for(ready.wait(), self.config.startup_timeout_s)
        except TimeoutError:
            await self.close()
            self.error = TimeoutError(
                f"no MCP handshake within {self.config.startup_timeout_s:g} s (startup_timeout_s; raise it "
                "for a server that is slow to start, e.g. one that downloads itself first)"
            )
        if self.client is None:
            raise self.error or ConnectionError("the session closed while starting")
        return self.client

    async def close(self) -> None:
        """Stop the owner task: it leaves the transport, which ends a stdio server process."""
        owner, self._owner = self._owner, None
        if self.relisting is not None:
            self.relisting.cancel()
        if owner is None:
            return
        self._stop.set()
        if self.client is None:
            # Still starting (it looks at the stop event only once initialized) or already dead: nothing to
            # finish gracefully. The stdio teardown is shielded, so a cancelled owner still ends the process.
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
            logger.warning(
                "MCP session %s could not restart: %s",
                self.label,
                _describe(exc, stdio=self.config.kind == "stdio"),
            )

    async def _own(self, ready: asyncio.Event, stop: asyncio.Event) -> None:
        kinds = ["streamable-http", "sse"] if self.kind == "auto" else [self.kind]
        failures: list[str] = []
        try:
            for kind in kinds:
                fallback = kind != kinds[-1]
                self.http_errors, self.notes = {}, []
                async with AsyncExitStack() as stack:
                    hung_up = asyncio.Event()
                    read, write = await stack.enter_async_context(_transport(self, kind))
                    read = await stack.enter_async_context(
                        _mended(read, self.http_errors, self.notes, hung_up)
                    )
                    roots = _roots_callback(self.roots) if self.roots else None
                    client = await stack.enter_async_context(
                        ClientSession(read, write, list_roots_callback=roots, message_handler=self._notified)
                    )
                    try:
                        init = await client.initialize()
                    except MCPError as exc:
                        # Per the spec's backwards-compatibility rule, a 4xx to the initialize POST means
                        # "try the old HTTP+SSE transport at the same URL".
                        if not fallback or exc.code == CONNECTION_CLOSED:
                            raise exc from None
                        failures.append(f"streamable HTTP: {_describe(exc)}")
                        continue
                    # Listing on every session, not just the first, also primes the SDK's per-session cache
                    # of output schemas; unprimed, the first concurrent calls would each list the tools again.
                    self._relist_again = False
                    if init.capabilities.tools is not None:
                        tools = await _list_tools(client, self.notes)
                    else:
                        tools = await _undeclared_tools(client, self.notes)
                    self.tools = {spec.name: spec for spec in tools}
                    self.kind = kind
                    self.client, self.hung_up = client, hung_up
                    ready.set()
                    if self._relist_again:  # the list changed while it was first fetched
                        self.tools_changed()
                    try:
                        await stop.wait()
                    finally:
                        self.client = None
                return
        except Exception as exc:  # recorded for open() and _pick(), which report it with the server's name
            self.error = RuntimeError("; ".join([*failures, f"SSE: {_describe(exc)}"])) if failures else exc
        finally:
            self.client = None
            self.pid = None
            ready.set()

    async def _notified(self, message: Any) -> None:
        """A message the session passes on: a changed tool list is fetched again; the rest is not ours."""
        if isinstance(message, ToolListChangedNotification):
            self.tools_changed()

    def tools_changed(self) -> None:
        """The server says its tool list changed: list it again in a task of its own, which calls to the
        server wait for (:meth:`McpProvider._pick`); one listing at a time, once more if the list changes
        again during one."""
        client = self.client
        if client is None or (self.relisting is not None and not self.relisting.done()):
            self._relist_again = True  # the listing under way (or the first one) may predate the change
            return
        self.relisting = asyncio.create_task(self._relist(client), name=f"mcp-relist-{self.label}")

    async def _relist(self, client: ClientSession) -> None:
        """Fetch the tool list of ``client`` again (until no change came in meanwhile); a failure keeps the
        list as it was."""
        while True:
            self._relist_again = False
            try:
                tools = {spec.name: spec for spec in await _list_tools(client, [])}
            except Exception as exc:
                if self.client is client:
                    logger.warning(
                        "MCP session %s: its tool list changed, but listing it again failed (%s); keeping "
                        "the list it had",
                        self.label,
                        _describe(exc, stdio=self.config.kind == "stdio"),
                    )
                return
            finally:
                self.notes.clear()  # what was mended in it: said once, at start-up
            if self.client is not client:
                return  # reopened meanwhile: the new session listed its tools itself
            added, removed = tools.keys() - self.tools.keys(), self.tools.keys() - tools.keys()
            if added or removed:
                logger.info(
                    "MCP session %s: tools added %s, removed %s", self.label, sorted(added), sorted(removed)
                )
            self.tools = tools
            if not self._relist_again:
                return


def _roots_callback(roots: tuple[Path, ...]) -> Any:
    """The answer to a server's ``roots/list``: each folder as a ``file://`` URI named by its last part."""
    result = ListRootsResult(roots=[Root(uri=root.as_uri(), name=root.name or str(root)) for root in roots])

    async def list_roots(context: Any) -> ListRootsResult:
        return result

    return list_roots


@asynccontextmanager
async def _transport(session: _Session, kind: str) -> AsyncIterator[tuple[Any, Any]]:
    """The transport of ``kind`` for the session's server, as its ``(read_stream, write_stream)`` pair."""
    config = session.config
    cap = int(config.max_result_mb * 2**20)
    if kind == "stdio":
        async with _stdio_transport(session, cap) as streams:
            yield streams
    elif kind == "sse":
        async with _sse_transport(session, cap) as streams:
            yield streams
    else:
        assert config.url is not None
        # The SDK's defaults: a short connect timeout, a long read timeout for the server's event stream.
        timeout = httpx2.Timeout(30.0, read=300.0)

        async def note_status(response: httpx2.Response) -> None:
            if response.status_code >= 400 and response.request.method == "POST":
                request_id = _posted_id(response.request)
                if request_id is not None:  # a notification gets no error reply to name the status in
                    status = f"HTTP {response.status_code} {response.reason_phrase}".strip()
                    session.http_errors[request_id] = status

        hooks = {"response": [_cap_json_body(cap, config.max_result_mb), note_status]}
        async with (
            _HttpClient(headers=config.headers, timeout=timeout, event_hooks=hooks) as http,
            streamable_http_client(config.url, http_client=http, max_sse_event_size=cap) as streams,
        ):
            yield streams


# The content block types of the MCP specification; a block of any other type is replaced by a short note.
_CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})
_NO_PARAMETERS = {"type": "object", "properties": {}}


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


@asynccontextmanager
async def _mended(
    read: Any, http_errors: dict[int | str, str], notes: list[str], hung_up: asyncio.Event
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

    ``hung_up`` is set when the server's messages end (a stdio server's stdout closed: it exited; an SSE
    event stream dropped), so a call sent after it is known never to have reached the server.
    """
    to_session, mended = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def relay() -> None:
        async with to_session:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                async for message in read:
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
    """Fix one reply's ``result`` in place, noting what was changed in ``notes`` (see :func:`_mended`)."""
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
                notes.append(f"listed a tool without a name, skipped: {_excerpt(repr(tool).encode())}")
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
                raise httpx2.StreamError(_too_large("the server's reply", self.megabytes))
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


_SSE_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-store"}


@asynccontextmanager
async def _sse_transport(session: _Session, cap: int) -> AsyncIterator[tuple[Any, Any]]:
    """An HTTP+SSE (2024-11-05) server as a transport, with events capped at ``cap`` bytes.

    The SDK's ``sse_client`` reads the server's event stream with a fixed 1 MiB limit per event and no way
    to raise it; one larger result ends the stream, the session and every call on it (they are re-run as
    ``repeated``, and the large call is blamed as a poison call). This transport reads the stream with
    :class:`_SseEvents`, so an event over ``max_result_mb`` fails only its own request. It follows the SDK
    otherwise: one GET event stream whose first ``endpoint`` event names where messages are POSTed (on the
    same origin), redirects followed only within the origin. A POST the server refuses fails its request at
    once (a 404, an unknown session after a restart, reopens it); a connection failure counts as a dead
    session, as a dropped event stream does.
    """
    config = session.config
    assert config.url is not None
    url = config.url
    events = _SseEvents(cap)
    timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's defaults: the event stream is long-lived
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_events(response: httpx2.Response, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        started = False
        async with to_session:
            with suppress(httpx2.TransportError, anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for chunk in response.aiter_bytes():
                    for event, data in events.feed(chunk):
                        if event == "endpoint" and isinstance(data, bytes) and not started:
                            endpoint = urljoin(url, data.decode(errors="replace").strip())
                            if urlparse(endpoint)[:2] != urlparse(url)[:2]:
                                raise ConnectionError(
                                    f"the server's message endpoint is on another origin: {endpoint}"
                                )
                            task_status.started(endpoint)
                            started = True
                        elif event == "message":
                            messages = (
                                _oversized_reply(data, cap)
                                if isinstance(data, _Oversized)
                                else [_parse_line(data)]
                            )
                            for message in messages:
                                await to_session.send(message)
        if not started:
            raise ConnectionError("the event stream ended before the server named its message endpoint")

    async def post(endpoint: str, message: SessionMessage) -> None:
        request_id = getattr(message.message, "id", None)
        try:
            body = message.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
            response = await request_within_origin(http, "POST", endpoint, json=body)
            response.raise_for_status()
            return
        except httpx2.HTTPStatusError as exc:
            status = f"HTTP {exc.response.status_code} {exc.response.reason_phrase}".strip()
            gone = "session not found: " if exc.response.status_code == 404 else ""
            reason, code = f"{gone}{status} to the message POST: {exc.response.text[:200]}", INTERNAL_ERROR
        except httpx2.TransportError as exc:
            reason, code = f"the message POST failed: {_describe(exc)}", CONNECTION_CLOSED
        except ValueError as exc:  # unserialisable: fail this request, not the session
            reason, code = f"cannot send the call: {exc}", INTERNAL_ERROR
        if request_id is None:
            logger.warning(
                "MCP session %s: a notification was not delivered: %s", session.label, redact(reason)
            )
        else:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await to_session.send(_error_reply(request_id, reason, code))

    async def write_messages(endpoint: str, tg: anyio.abc.TaskGroup) -> None:
        async with from_session:
            async for message in from_session:
                tg.start_soon(post, endpoint, message)  # concurrent POSTs, as the SDK sends them

    async with (
        httpx2.AsyncClient(headers=config.headers, timeout=timeout) as http,
        stream_within_origin(http, "GET", url, headers=_SSE_HEADERS) as response,
    ):
        response.raise_for_status()
        media = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media != "text/event-stream":
            raise ConnectionError(f"expected an event stream (text/event-stream), got {media or 'no type'!r}")
        async with anyio.create_task_group() as tg:
            endpoint = await tg.start(read_events, response)
            tg.start_soon(write_messages, endpoint, tg)
            try:
                yield read_stream, write_stream
            finally:
                read_stream.close()
                write_stream.close()
                tg.cancel_scope.cancel()


@asynccontextmanager
async def _stdio_transport(session: _Session, cap: int) -> AsyncIterator[tuple[Any, Any]]:
    """A stdio server as a transport, with stdout lines capped at ``cap`` bytes.

    The SDK's own stdio client grows a string for each line until its newline arrives, so one 100 MB result
    holds the session's reader (and every later call) for as long as the concatenation takes. Here lines
    are counted in bytes and, past the cap, skipped as they stream in; the request they answered gets an
    error reply. Shutdown follows the SDK's policy: close stdin, wait, then SIGTERM/SIGKILL the group.
    """
    config = session.config
    assert config.command is not None
    command = sys.executable if config.command in PYTHON_COMMANDS else config.command
    process = await anyio.open_process(
        [command, *config.args], env=_server_env(config), stderr=subprocess.PIPE, cwd=config.cwd,
        start_new_session=True,
    )  # fmt: skip
    session.pid = process.pid
    assert process.stderr is not None
    stderr_done = anyio.Event()
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    lines = _LineReader(cap)

    async def read_stdout() -> None:
        assert process.stdout is not None
        async with to_session:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
                async for chunk in process.stdout:
                    for message in lines.feed(chunk):
                        await to_session.send(message)

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    try:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    except ValueError as exc:  # unserialisable: fail this request, not the session
                        request_id = getattr(message.message, "id", None)
                        if request_id is not None:
                            await to_session.send(_error_reply(request_id, f"cannot send the call: {exc}"))
                        continue
                    await process.stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()  # the server is gone: let the session see the connection end

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdout)
        tg.start_soon(write_stdin)
        tg.start_soon(forward_stderr, process.stderr, _server_stderr(), stderr_done, session.label)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await _stop_process(process)
                # The server's last words (a traceback) are passed on before anyone reports its end; a
                # grandchild that keeps the pipe open past the grace is cut off, not waited for.
                with anyio.move_on_after(_EXIT_GRACE_S):
                    await stderr_done.wait()
                with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await process.stderr.aclose()
                for stream in (read_stream, write_stream):
                    await stream.aclose()
            tg.cancel_scope.cancel()


async def _stop_process(process: Process) -> None:
    """Close stdin, give the server a moment to exit, then end its whole process group."""
    assert process.stdin is not None and process.stdout is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, _EXIT_GRACE_S):
        with suppress(ProcessLookupError, OSError):
            await terminate_posix_process_tree(process, _EXIT_GRACE_S)
        if not await _exited(process, _EXIT_GRACE_S):
            logger.warning("MCP server process %d survived SIGKILL; abandoning it", process.pid)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


async def _exited(process: Process, timeout: float) -> bool:
    """Whether the process ended within ``timeout``, by polling its return code: ``wait()`` would also wait
    for the pipes to close, which a grandchild holding them open can delay forever."""
    with anyio.move_on_after(timeout):
        while process.returncode is None:
            await anyio.sleep(0.01)
    return process.returncode is not None


class _Oversized(NamedTuple):
    """A line or event dropped for outgrowing the cap: its size and its first and last few KB."""

    size: int
    head: bytes
    tail: bytes


class _CappedLines:
    """Splits a byte stream into ``\\n``-ended lines, never holding more than ``cap`` bytes of one.

    A line over the cap is dropped as it arrives and comes out as :class:`_Oversized`: only its first and
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

    def feed(self, chunk: bytes) -> list[bytes | _Oversized]:
        """Lines completed by ``chunk``."""
        out: list[bytes | _Oversized] = []
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

    def _finish(self) -> bytes | _Oversized:
        size, parts, head, tail = self._size, self._parts, self._head, self._tail
        self._size, self._parts, self._head, self._tail = 0, [], b"", b""
        if size <= self.cap:
            return b"".join(parts).removesuffix(b"\r")
        return _Oversized(size, head, tail.removesuffix(b"\r"))


class _LineReader:
    """A stdio server's stdout as JSON-RPC messages, one per line (see :class:`_CappedLines`)."""

    def __init__(self, cap: int):
        self._lines = _CappedLines(cap)

    def feed(self, chunk: bytes) -> list[SessionMessage | Exception]:
        """Messages completed by ``chunk`` (parse failures as exceptions, which the session logs)."""
        out: list[SessionMessage | Exception] = []
        for line in self._lines.feed(chunk):
            if isinstance(line, _Oversized):
                out += _oversized_reply(line, self._lines.cap)
            elif line.strip():
                out.append(_parse_line(line))
        return out


class _SseEvents:
    """An HTTP+SSE event stream as ``(event type, data)`` pairs, holding at most ``cap`` bytes of one event.

    The SDK's SSE client stops the whole stream at an event over 1 MiB, and with it the session and every
    call on it; here an event over the cap is dropped as it streams in and comes out as
    :class:`_Oversized`, so only the request it answers fails. Comments (``: ping``) and fields other than
    ``event`` and ``data`` are skipped; several ``data`` lines are joined with newlines, as the standard says.
    """

    def __init__(self, cap: int):
        self._lines = _CappedLines(cap)
        self._event = b"message"
        self._data: list[bytes] = []
        self._size = 0
        self._dropped: _Oversized | None = None

    def feed(self, chunk: bytes) -> list[tuple[str, bytes | _Oversized]]:
        """Events completed by ``chunk``."""
        out: list[tuple[str, bytes | _Oversized]] = []
        for line in self._lines.feed(chunk):
            if isinstance(line, _Oversized):  # a data line over the cap: keep what names its request
                self._size += line.size
                head = self._data[0] if self._data else line.head.partition(b":")[2].removeprefix(b" ")
                self._dropped, self._data = _Oversized(self._size, head[:_SNIFF_BYTES], line.tail), []
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
            self._dropped, self._data = _Oversized(self._size, head, value[-_SNIFF_BYTES:]), []
        else:
            self._data.append(value)


def _oversized_reply(line: _Oversized, cap: int) -> list[SessionMessage | Exception]:
    """An error reply for the request whose over-cap reply was dropped (none if its id is unreadable)."""
    message = _too_large(f"the server's reply of {line.size / 2**20:.3g} MB", cap / 2**20)
    request_id = _sniff_id(line.head, line.tail)
    if request_id is None:
        logger.warning("MCP server sent a message too large: %s; no request id found in it, dropped", message)
        return []
    return [_error_reply(request_id, message)]


def _parse_line(line: bytes) -> SessionMessage | Exception:
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
            logger.warning("MCP server wrote text before a message, dropped: %s", _excerpt(line[:start]))
        line = line[start:]
    parsed: Any = None
    try:
        parsed = json.loads(line.decode("utf-8", "replace"))
        return SessionMessage(adapter.validate_python(sendable(parsed), by_name=False))
    except ValueError as exc:
        request_id = _sniff_id(line[:_SNIFF_BYTES], line[-_SNIFF_BYTES:])
        if request_id is None or (isinstance(parsed, dict) and "method" in parsed):
            logger.warning("MCP server wrote a line that is no JSON-RPC message, dropped: %s", _excerpt(line))
            return exc
        reason = str(exc).splitlines()[0][:200]
        return _error_reply(request_id, f"the server's reply is not a valid JSON-RPC message: {reason}")


def _excerpt(text: bytes, limit: int = 200) -> str:
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


def _too_large(what: str, megabytes: float) -> str:
    """The error for a reply over the cap, saying what the cap counts."""
    return (
        f"{what} exceeds max_result_mb ({megabytes:g} MB, counted on the whole reply message; Python SDK "
        "servers send a text result twice, as content and as structuredContent)"
    )


def _sniff_id(head: bytes, tail: bytes) -> int | str | None:
    match = _HEAD_ID.search(head) or _TAIL_ID.search(tail)
    return json.loads(match.group(1)) if match else None


def _error_reply(request_id: int | str, message: str, code: int = INTERNAL_ERROR) -> SessionMessage:
    error = ErrorData(code=code, message=message)
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


def _server_env(config: McpServerConfig) -> dict[str, str]:
    """A stdio server's environment: the SDK's safe variables plus :data:`PASSTHROUGH_ENV` plus ``env:``;
    with ``inherit_env: true`` ours entire, plus ``env:``.

    A proxy URL may carry a password (``http://user:pass@proxy:3128``); it is recorded as a secret
    (:func:`~swift_rlfactory.redaction.remember_url`), so a log line or an observation that shows the URL
    shows ``user:***@``."""
    env = (
        {**os.environ, **config.env}
        if config.inherit_env
        else {
            **get_default_environment(),
            **{name: os.environ[name] for name in PASSTHROUGH_ENV if name in os.environ},
            **config.env,
        }
    )
    for name in _PROXY_ENV:
        if env.get(name):
            remember_url(env[name])
    return env


_MAX_TOOL_PAGES = 1000


async def _list_tools(client: ClientSession, notes: list[str]) -> list[ToolSpec]:
    """Every tool the server offers, following pagination cursors; a tool listed twice counts once.

    A tool that can only run as an MCP *task* (``execution.taskSupport: "required"``; server-everything's
    ``simulate-research-query``) is left out, with one note naming every such tool: this client does not
    speak the tasks protocol, so the model would only ever read "requires task augmentation" errors.
    A cursor the server already sent (a server paging in a loop), or more than :data:`_MAX_TOOL_PAGES`
    pages, fails start-up with an error saying so, instead of listing until the handshake times out.
    """
    specs: dict[str, ToolSpec] = {}
    task_only: list[str] = []
    seen: set[str] = set()
    cursor: str | None = None
    while True:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        try:
            page = await client.list_tools(params=params)
        except ValidationError as exc:
            raise RuntimeError(f"the server's tools/list reply is not valid MCP: {_invalid(exc)}") from None
        for t in page.tools:
            if t.name in specs or t.name in task_only:
                notes.append(f"listed tool {t.name!r} more than once; using the first")
                continue
            if t.execution is not None and t.execution.task_support == "required":
                task_only.append(t.name)
                continue
            specs[t.name] = ToolSpec(
                name=t.name,
                description=t.description or t.title or "",
                parameters=_prompt_schema(t.input_schema),
            )
        cursor = page.next_cursor
        if not cursor:
            if task_only:
                notes.append(
                    f"{len(task_only)} tool(s) left out, as they run only as MCP tasks "
                    f"(execution.taskSupport: required), which this client does not support: "
                    f"{', '.join(map(repr, task_only))}"
                )
            return list(specs.values())
        if cursor in seen or len(seen) >= _MAX_TOOL_PAGES:
            why = "sent a cursor again" if cursor in seen else f"sent more than {_MAX_TOOL_PAGES} pages"
            raise RuntimeError(f"tools/list never ends: the server {why} ({cursor[:80]!r})")
        seen.add(cursor)


def _prompt_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's ``inputSchema`` as the model reads it in every prompt: without its ``"$schema"``.

    zod-to-json-schema (every TypeScript SDK server) writes ``"$schema":
    "http://json-schema.org/draft-07/schema#"`` into each tool's schema, about 15 tokens a tool that say
    nothing about the arguments. Nothing here validates arguments against the schema (the server does, with
    its own), and what types them (``$ref``, ``definitions``, ``$defs``, ``additionalProperties``) stays.
    """
    return {key: value for key, value in schema.items() if key != "$schema"}


async def _undeclared_tools(client: ClientSession, notes: list[str]) -> list[ToolSpec]:
    """The tools of a server that did not declare the tools capability, asked for all the same.

    A resources- or prompts-only server may answer ``tools/list`` with "method not found" (the
    specification lets it): no tools, nothing to say. But some servers list tools without declaring the
    capability; loading none of their tools would leave the model without them and nobody told why, so
    they are used, with a note saying the server forgot the capability.
    """
    try:
        tools = await _list_tools(client, notes)
    except (MCPError, RuntimeError) as exc:
        logger.debug("MCP server without the tools capability has no tools/list: %s", _describe(exc))
        return []
    if tools:
        notes.append(
            f"did not declare the tools capability in its initialize reply, but lists {len(tools)} tool(s); "
            "using them"
        )
    return tools


# The SDK's RuntimeErrors for a result its tool's outputSchema rejects (ClientSession.validate_tool_result).
_OUTPUT_SCHEMA_FAULT = re.compile(
    r"Invalid structured content returned by tool |Tool .* has an output schema but did not return"
    r"|Invalid schema for tool ",
    re.S,
)


def _output_schema_fault(exc: RuntimeError) -> str:
    """One short line for a result the tool's outputSchema rejects, in place of the SDK's message (which
    holds jsonschema's multi-line dump of the whole schema and instance): the first error and where."""
    message, cause = str(exc), exc.__cause__
    if message.startswith("Tool "):
        return "it has an outputSchema but returned no structured content"
    if message.startswith("Invalid schema"):
        first = str(getattr(cause, "message", None) or message.partition(": ")[2]).splitlines()[0]
        return f"its outputSchema is not a valid JSON schema: {first[:200]}"
    first = str(getattr(cause, "message", None) or message.partition(": ")[2].splitlines()[0])
    path = getattr(cause, "json_path", "$")
    where = f" (at {path})" if path != "$" else ""
    return f"it returned structured content that does not match its outputSchema: {first[:200]}{where}"


def _invalid(exc: ValidationError) -> str:
    """A short account of why a result failed validation: where, and for a content block what is wrong."""
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"][:2])
    if where.startswith("content.") and len(first["loc"]) > 3:
        return f"{where}: {_block_fault(errors, first['loc'][:2])}"[:200]
    value = first.get("input")
    if isinstance(value, dict) and "name" in value and where.startswith("tools."):
        return f"tool {str(value['name'])[:80]!r}: {'.'.join(map(str, first['loc'][2:]))}: {first['msg']}"[
            :200
        ]
    return f"{where}: {first['msg']}"[:200]


def _block_fault(errors: list[Any], at: tuple[Any, ...]) -> str:
    """What is wrong with the content block at ``at``, from pydantic's errors for every kind of block.

    A block's ``type`` is always one we know here (:func:`_mend` replaced the others), so the kinds whose
    ``type`` the errors say it does not have are set aside, and the first error of its own kind is the
    fault: ``a 'text' block without text`` reads ``'text' block: text: Field required``. Union members'
    class names are left out of the field's path.
    """
    wrong_kind = [e for e in errors if e["loc"][:2] == at and e["loc"][3:] == ("type",)]
    other = {e["loc"][:3] for e in wrong_kind}
    own = [e for e in errors if e["loc"][:2] == at and len(e["loc"]) > 3 and e["loc"][:3] not in other]
    if not own or not wrong_kind:
        return errors[0]["msg"]
    field = ".".join(str(part) for part in own[0]["loc"][3:] if not str(part)[:1].isupper())
    return f"{str(wrong_kind[0]['input'])[:50]!r} block: {field}: {own[0]['msg']}"


def _server_stderr() -> TextIO:
    """Where a stdio server's stderr is forwarded, redacted (:mod:`.server_stderr`): ours, or the process's
    own when ours is no real file (a notebook)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__
    return sys.stderr


def _describe(exc: BaseException, stdio: bool = False) -> str:
    """A one-line cause, digging through the exception groups that anyio task groups raise; ``stdio`` when
    the server is a subprocess of ours, whose stderr (printed above) may say why it closed the connection."""
    leaves = getattr(exc, "exceptions", None)
    if leaves:
        # A transport failure arrives with the session's own "connection closed" beside it; the former says why.
        leaves = sorted(leaves, key=lambda e: isinstance(e, MCPError))
        return _describe(leaves[0], stdio)
    if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
        if stdio:
            return "the server closed the connection (its stderr, above, may say why)"
        return (
            "the connection to the server closed (the server stopped or dropped it; its own log may say why)"
        )
    return redact(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def _endpoint(config: McpServerConfig) -> str:
    """The command line of a stdio server or the URL of a remote one, for (redacted) error messages."""
    if config.command is not None:
        return shlex.join([config.command, *config.args])
    return f"{config.kind} {config.url}"
