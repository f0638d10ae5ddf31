"""The sessions of one MCP server of ``scope: trajectory``: one per live trajectory, keyed by its id.

A remote server gets a session of its own per trajectory (its own ``Mcp-Session-Id``), taken from the
``ready_sessions`` kept open ahead and closed when the trajectory ends; a stdio server lends one process of
a bounded pool, reset (``reset_tool``) or restarted before its next lease. A session lost under a
trajectory is started afresh and the call fails saying the trajectory's state was lost; nothing is re-run.
See docs/mcp.md, "Per-trajectory servers".
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession

from swift_rlfactory.redaction import redact

from ..base import ToolError, TransportError
from ..episode_state import current_episode
from .calling import Lost, call_once
from .config import McpServerConfig
from .errors import describe
from .session import Session

logger = logging.getLogger(__package__)

OPEN_AHEAD = 2
"""Sessions opened ahead at once (remote): a trickle beside the running trajectories' calls, which a burst of
handshakes would slow (docs/mcp.md, "Per-trajectory servers"; benchmarks/rollout/RESULTS.md, "Bursts")."""

RESET_TIMEOUT_S = 30.0
"""How long a ``reset_tool`` call may take before the process is restarted instead."""


@dataclass
class Lease:
    """One trajectory's session; ``generation`` counts the restarts it saw, so one loss restarts it once."""

    session: Session
    generation: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class TrajectoryLeases:
    """The per-trajectory sessions of one server and, for a stdio server, its pool of processes.

    :meth:`begin` and :meth:`end` are the episode lifecycle's (a call needs its trajectory begun: a late
    call of an ended one never takes a session again); a session is taken at the trajectory's first call.
    """

    def __init__(self, name: str, config: McpServerConfig, roots: tuple[Path, ...]):
        self.name = name
        self.config = config
        self.roots = roots
        self.stdio = config.kind == "stdio"
        self.closed = False
        self._live: set[str] = set()
        self._leases: dict[str, asyncio.Task[Lease]] = {}
        self._idle: list[Session] = []
        self._sessions: set[Session] = set()  # every session open or opening: the pool's processes
        self._processes = 0  # stdio: processes running or starting, at most config.pool_size
        self._freed = asyncio.Condition()
        self._recycling: set[asyncio.Task[None]] = set()
        self._ready: deque[asyncio.Future[Session]] = deque()  # remote: sessions opened ahead, oldest first
        self._labels = itertools.count()

    @property
    def pids(self) -> list[int]:
        """Process ids of the pool's live processes (empty for a remote server)."""
        return [s.pid for s in self._sessions if s.pid is not None]

    @property
    def open_sessions(self) -> int:
        """Sessions open or opening now: leased, idle in the pool, being reset, or opened ahead."""
        return len(self._sessions)

    @property
    def leased(self) -> int:
        """Trajectories holding (or waiting for) a session now."""
        return len(self._leases)

    async def start(self) -> Session:
        """Open a first session to list the server's tools: a stdio one stays in the pool, idle; a remote
        one is the first trajectory's (it ran nothing). Raises what :meth:`Session.open` raises."""
        session = self._session()
        self._processes += self.stdio
        try:
            await session.open()
        except BaseException:
            await self._drop(session)
            raise
        if self.stdio:
            self._idle.append(session)
        else:
            ready = asyncio.get_running_loop().create_future()
            ready.set_result(session)
            self._ready.append(ready)
            self._fill()
        return session

    def begin(self, key: str) -> None:
        """Trajectory ``key`` is live: its first call takes a session."""
        self._live.add(key)

    async def end(self, key: str) -> None:
        """Trajectory ``key`` ended: close its session, or give its process back to the pool to be reset."""
        self._live.discard(key)
        task = self._leases.pop(key, None)
        if task is None:
            return
        if not task.done():
            task.cancel()
        await asyncio.wait({task})
        if task.cancelled() or task.exception() is not None:
            return  # it gave back what it had taken
        session = task.result().session
        if self.stdio and not self.closed:
            recycle = asyncio.create_task(self._recycle(session), name=f"mcp-reset-{session.label}")
            self._recycling.add(recycle)
            recycle.add_done_callback(self._recycling.discard)
        else:
            await self._drop(session)

    async def close(self) -> None:
        """Close every session (ending the pool's processes); safe to call twice."""
        self.closed = True
        self._live.clear()
        pending = [*self._leases.values(), *self._recycling, *self._ready]
        self._leases.clear()
        self._ready.clear()
        async with self._freed:
            self._freed.notify_all()  # a trajectory waiting for the pool stops waiting
        if pending:  # a session starting is let finish: one cancelled while its process spawns may outlive us
            _, late = await asyncio.wait(pending, timeout=self.config.startup_timeout_s + RESET_TIMEOUT_S)
            for task in late:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await asyncio.gather(*(self._drop(s) for s in list(self._sessions)), return_exceptions=True)
        self._idle.clear()

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call ``name`` on the session of the trajectory whose calls run in this context.

        Raises :class:`ToolError` outside a live trajectory, when the pool stayed full for
        ``lease_timeout_s``, and when the session was lost (then it is started afresh for the trajectory's
        next call, and this one is not run again); :class:`TransportError` when no session could open.
        """
        key = current_episode.get()
        if key is None or key not in self._live:
            raise ToolError(
                f"MCP server {self.name!r} keeps a session per trajectory (scope: trajectory), and this "
                "call belongs to no live trajectory"
            )
        lease = await self._lease(key)
        session, generation = lease.session, lease.generation
        client = session.client
        if client is None:  # it died between calls: what the trajectory kept there is gone
            cause = session.error or ConnectionError("the server's session closed")
            await self._renew(lease, generation)
            raise self._lost(cause)
        try:
            return await call_once(
                session, client, name, arguments, call=object(), repeat=False,
                max_result_mb=self.config.max_result_mb, on_unanswered=_ignore,
            )  # fmt: skip
        except Lost as lost:
            await self._renew(lease, generation)
            raise self._lost(lost.cause) from None

    async def _lease(self, key: str) -> Lease:
        """The trajectory's lease, taken once however many of its calls ask at the same time."""
        task = self._leases.get(key)
        if task is None:
            task = asyncio.create_task(self._take(), name=f"mcp-lease-{self.name}")
            self._leases[key] = task
        try:
            return await asyncio.shield(task)
        except (ToolError, TransportError):
            if self._leases.get(key) is task:  # a later call of the trajectory tries again
                del self._leases[key]
            raise

    async def _take(self) -> Lease:
        """A fresh session (remote), or a process of the pool: an idle one, else a new one while fewer than
        ``pool`` run, else the first one given back within ``lease_timeout_s``."""
        if not self.stdio:
            return Lease(await self._opened(await self._next_remote()))
        wait = self.config.lease_wait_s
        try:
            async with asyncio.timeout(wait), self._freed:
                await self._freed.wait_for(
                    lambda: self.closed or self._idle or self._processes < self.config.pool_size
                )
                if self.closed:
                    raise ToolError(f"MCP server {self.name!r} was closed")
                session = self._idle.pop() if self._idle else None
                if session is None:
                    self._processes += 1
        except TimeoutError:
            raise ToolError(
                f"MCP server {self.name!r}: all {self.config.pool_size} processes of its pool stayed leased "
                f"to other trajectories for {wait:g} s (lease_timeout_s); raise 'pool' or lower the "
                "trajectories run at once"
            ) from None
        if session is None:
            session = self._session()
        elif session.client is not None:
            return Lease(session)
        return Lease(await self._opened(session))

    async def _next_remote(self) -> Session:
        """A session opened ahead (a fresh one, used by nobody), its place filled again in the background,
        so that a trajectory's start rarely waits for a handshake."""
        spare = self._pick()
        self._fill()
        try:
            return await asyncio.shield(spare)
        except asyncio.CancelledError:  # ended while it opened: it is nobody's, close it once open
            spare.add_done_callback(self._drop_later)
            raise

    def _pick(self) -> asyncio.Future[Session]:
        """The session opened ahead that is ready first: an open one, else the oldest still opening, else
        one opened now. Those that failed to open are left out: a fresh try says if the server is still down."""
        for spare in [s for s in self._ready if s.done() and (s.cancelled() or s.exception() is not None)]:
            self._ready.remove(spare)
        spare = next((s for s in self._ready if s.done()), self._ready[0] if self._ready else None)
        if spare is None:
            return self._ahead()
        self._ready.remove(spare)
        return spare

    def _fill(self, _: object = None) -> None:
        """Start opening sessions until ``ready_sessions`` are open or opening, at most ``OPEN_AHEAD`` at a
        time: each next one as one opens (a trickle beside the running trajectories' calls)."""
        while not self.closed and len(self._ready) < self.config.ready_size:
            if sum(not s.done() for s in self._ready) >= OPEN_AHEAD:
                return
            spare = self._ahead()
            spare.add_done_callback(self._fill)
            self._ready.append(spare)

    def _ahead(self) -> asyncio.Future[Session]:
        return asyncio.ensure_future(self._opened(self._session()))

    def _drop_later(self, done: asyncio.Future[Session]) -> None:
        if not done.cancelled() and done.exception() is None:
            task = asyncio.ensure_future(self._drop(done.result()))
            self._recycling.add(task)
            task.add_done_callback(self._recycling.discard)

    async def _opened(self, session: Session) -> Session:
        """``session`` open (a pool process that died idle is started again), or dropped and
        :class:`TransportError` raised."""
        try:
            if session.client is None:
                await session.restart()  # a new one opens; one that died idle ends, then opens again
            if session.client is None:
                raise session.error or ConnectionError("the session closed while starting")
        except asyncio.CancelledError:
            await asyncio.shield(self._drop(session))
            raise
        except Exception as exc:
            await self._drop(session)
            why = describe(exc, stdio=self.stdio)
            raise TransportError(
                redact(f"MCP server {self.name!r} is unavailable: {why}"), delivered=False
            ) from None
        return session

    async def _recycle(self, session: Session) -> None:
        """Make a process given back fit for the next trajectory, then put it in the pool: its
        ``reset_tool`` called, else (or when that fails) the process restarted."""
        try:
            if not await self._reset(session):
                await session.restart()
        except asyncio.CancelledError:
            await asyncio.shield(self._drop(session))
            raise
        if session.client is None:
            logger.warning("MCP server %r: a pool process could not be restarted", self.name)
            await self._drop(session)
            return
        async with self._freed:
            self._idle.append(session)
            self._freed.notify()

    async def _reset(self, session: Session) -> bool:
        """Call the entry's ``reset_tool`` on ``session``; whether that worked."""
        client, tool = session.client, self.config.reset_tool
        if tool is None or client is None:
            return False
        try:
            async with asyncio.timeout(RESET_TIMEOUT_S):
                await call_once(
                    session, client, tool, {}, call=object(), repeat=False,
                    max_result_mb=self.config.max_result_mb, on_unanswered=_ignore,
                )  # fmt: skip
        except (Exception, TimeoutError) as exc:
            logger.warning(
                "MCP server %r: reset_tool %r failed (%s); restarting the process instead",
                self.name, tool, describe(exc, stdio=True),
            )  # fmt: skip
            return False
        return True

    async def _renew(self, lease: Lease, generation: int) -> None:
        """Start the trajectory's lost session afresh, once per loss however many calls saw it."""
        async with lease.lock:
            if lease.generation != generation:
                return
            lease.generation += 1
            logger.warning(
                "MCP server %r: session %s lost; starting it afresh", self.name, lease.session.label
            )
            await lease.session.restart()

    def _lost(self, cause: BaseException) -> ToolError:
        why = describe(cause, stdio=self.stdio)
        return ToolError(
            redact(
                f"MCP server {self.name!r} lost this trajectory's session ({why}) and was started afresh: "
                "what this trajectory had stored on it is gone, and this call was not run again"
            )
        )

    def _session(self) -> Session:
        session = Session(f"{self.name}@{next(self._labels)}", self.config, self.roots)
        self._sessions.add(session)
        return session

    async def _drop(self, session: Session) -> None:
        """Close ``session`` for good (a remote one sends DELETE; a process ends) and free its pool place."""
        if session not in self._sessions:
            return
        self._sessions.discard(session)
        with suppress(Exception):
            await session.close()
        if self.stdio:
            async with self._freed:
                self._processes -= 1
                self._freed.notify()


def _ignore(session: Session, client: ClientSession) -> None:
    """A per-trajectory session is not probed for hangs: it is reset or restarted when its trajectory ends."""
