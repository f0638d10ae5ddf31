"""The sessions of one server and how a call heals across them: routing to the least-loaded live session,
reopening expired and dead ones, re-running the calls a death took down (together; suspects in groups, see
:mod:`.isolation`), and restarting a hung server. See docs/mcp.md, "Healing"."""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from typing import Any
from weakref import WeakSet

from mcp.client.session import ClientSession

from swift_rlfactory.redaction import redact

from ..base import ToolError, TransportError, current_call
from .calling import Lost, call_once
from .config import McpServerConfig
from .errors import describe
from .isolation import POISON_CRASHES, PoolCall, judge
from .session import Session

logger = logging.getLogger(__package__)

# Re-runs one call may need because of the server, not itself: sessions that expired under it, died under
# it while it ran beside any call, or were found dead. Deaths in a group of suspects are not counted: each
# halves the group, and a call alone is poison at its second.
_MAX_RERUNS = 4

HUNG_AFTER_TIMEOUTS = 3
"""Calls in a row given up on (timed out or cancelled) with no reply in between before a session is pinged."""
PING_TIMEOUT_S = 5.0
"""How long that ping may take before the session counts as hung and is restarted."""
RELIST_WAIT_S = 5.0
"""How long a call waits for the tool list its server said changed (``notifications/tools/list_changed``)
to be fetched again; past it, the call goes by the list as it was."""


class _Expired(Exception):
    """The server no longer knows the session; it did not run the call."""


class _Died(Exception):
    """The session's transport died under the call; ``delivered`` unless the server had closed the
    connection before the call was sent (then no server got it); ``grouped`` if the call ran in a group of
    suspects."""

    def __init__(self, delivered: bool, grouped: bool):
        super().__init__()
        self.delivered = delivered
        self.grouped = grouped


class SessionPool:
    """The client sessions of one server (``config.sessions`` of them) and their healing.

    Args:
        name: the server's key in ``mcpServers``, for errors and logs.
        config: how to start or reach the server.
        sessions: the sessions, not yet open.
    """

    def __init__(self, name: str, config: McpServerConfig, sessions: list[Session]):
        self.name = name
        self.config = config
        self.sessions = sessions
        self.closed = False
        self._restarts: dict[Session, asyncio.Task[None]] = {}
        self._probes: dict[Session, asyncio.Task[None]] = {}
        self._judged: WeakSet[ClientSession] = WeakSet()  # deaths whose witnesses were counted, regrouped

    async def close(self) -> None:
        """Stop every session (terminating stdio servers) and any pending restart; safe to call twice."""
        self.closed = True
        restarts = [*self._restarts.values(), *self._probes.values()]
        for task in restarts:
            task.cancel()
        await asyncio.gather(*restarts, return_exceptions=True)
        await asyncio.gather(*(session.close() for session in self.sessions), return_exceptions=True)

    async def relisted(self) -> None:
        """Wait, at most :data:`RELIST_WAIT_S`, until each session's tool list reflects every change its
        server announced so far (one or two ``tools/list`` round trips, however many announcements)."""
        with suppress(TimeoutError):
            async with asyncio.timeout(RELIST_WAIT_S):
                await asyncio.gather(*(session.fresh() for session in self.sessions))

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call ``name`` on the least-loaded live session, healing expired and dead sessions on the way (see
        :meth:`~.provider.McpProvider.call_tool`)."""
        account = current_call.get()
        call = PoolCall()
        tries = reruns = 0
        may_have_run = False
        try:
            while True:
                if tries and account is not None:
                    account.attempts += 1
                tries += 1
                try:
                    return await self._try(call, name, arguments, repeat=may_have_run)
                except _Expired:
                    pass  # the server refused the call without running it
                except _Died as death:
                    if death.delivered:  # else it found a session that had died before: no run of it
                        if call.crashes >= POISON_CRASHES:
                            raise ToolError(
                                f"MCP server {self.name!r} crashed {call.crashes} times while running this "
                                "call alone; not retried (the arguments may crash the server)"
                            ) from None
                        may_have_run = True
                        if death.grouped:
                            continue  # bounded by the halving of its group, not by _MAX_RERUNS
                except TransportError as down:  # no session opened: this try never left, an earlier one may
                    if may_have_run and not down.delivered:
                        raise TransportError(*down.args, delivered=True) from None
                    raise
                reruns += 1
                if reruns > _MAX_RERUNS:
                    raise TransportError(f"MCP server {self.name!r} lost {reruns} sessions under this call")
        finally:
            call.join(None)

    async def _try(self, call: PoolCall, name: str, arguments: dict[str, Any], repeat: bool) -> Any:
        """One try on a picked session (the seat of the call's group, if it runs in one); a session that
        expired or died under it is reopened, and the try raises :class:`_Expired` or :class:`_Died`."""
        group = call.group
        if group is None:
            session, client = await self.pick(name)
        else:
            session, client = await group.seat(lambda: self.pick(name))
        try:
            return await call_once(
                session, client, name, arguments, call=call, repeat=repeat,
                max_result_mb=self.config.max_result_mb, on_unanswered=self._unanswered,
            )  # fmt: skip
        except Lost as lost:
            self._lost(session, client, lost.cause)
            if lost.expired:
                raise _Expired from None
            delivered = not (lost.sent_after_close or lost.marker.refused)
            if client not in self._judged:  # the first call to learn of this death judges it for all
                self._judged.add(client)
                judge(session.witnesses.pop(client, {call} if delivered else set()))
            raise _Died(delivered, grouped=group is not None) from None

    async def pick(self, name: str) -> tuple[Session, ClientSession]:
        """The live, unreserved session offering tool ``name`` with the fewest calls in flight; waits for a
        reopening one, and for a tool list the server said changed (one ``tools/list`` round trip, at most
        :data:`RELIST_WAIT_S`). Dead sessions are reopened here too (a transport that died between calls).

        Raises :class:`TransportError` when no session is live, :class:`ToolError` when no live session
        lists ``name`` (the server changed its tool list during the run).
        """
        relisted = False
        while True:
            live = await self._live()
            if not relisted and any(s.relisting is not None and not s.relisting.done() for s in live):
                await self.relisted()  # the list the server just said is stale must not route the call
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
            await asyncio.sleep(0.02)  # every live session is held by a group of suspects; they are rare

    async def _live(self) -> list[Session]:
        """The live sessions, once any reopening is done when none is live; :class:`TransportError` if none."""
        if not self.closed:
            for session in self.sessions:
                if session.client is None:
                    self._restart_soon(session)
            if self._restarts and all(session.client is None for session in self.sessions):
                await asyncio.wait(list(self._restarts.values()), return_when=asyncio.FIRST_COMPLETED)
        live = [session for session in self.sessions if session.client is not None]
        if not live:
            stdio = self.config.kind == "stdio"
            errors = "; ".join(describe(s.error, stdio=stdio) for s in self.sessions if s.error is not None)
            raise TransportError(
                redact(f"MCP server {self.name!r} is unavailable: {errors or 'closed'}"), delivered=False
            )
        return live

    def _unanswered(self, session: Session, client: ClientSession) -> None:
        """A call on ``client`` was given up on unanswered; after too many in a row, check it is alive."""
        if session.client is not client or self.closed:
            return
        session.unanswered += 1
        if session.unanswered >= HUNG_AFTER_TIMEOUTS and session not in self._probes:
            task = asyncio.create_task(self._probe(session, client), name=f"mcp-probe-{session.label}")
            self._probes[session] = task
            task.add_done_callback(lambda _: self._probes.pop(session, None))

    async def _probe(self, session: Session, client: ClientSession) -> None:
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

    def _lost(self, session: Session, client: ClientSession, exc: BaseException) -> None:
        """A call found ``client`` dead or forgotten: stop routing to it and reopen it, once per loss."""
        if session.client is not client or self.closed:
            return  # an earlier call already reported this loss, or we are shutting down
        logger.warning(
            "MCP server %r: session %s lost (%s); reopening it",
            self.name,
            session.label,
            describe(exc, stdio=self.config.kind == "stdio"),
        )
        session.client = None
        self._restart_soon(session)

    def _restart_soon(self, session: Session) -> None:
        if session not in self._restarts:
            task = asyncio.create_task(session.restart(), name=f"mcp-restart-{session.label}")
            self._restarts[session] = task
            task.add_done_callback(lambda _: self._restarts.pop(session, None))
