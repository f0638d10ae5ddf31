"""Finding the call that crashes a server among the calls its deaths took down, without running the innocent
ones one at a time: calls in flight at a second death become suspects and run in groups of their own, halved
at each death, until a call that dies twice alone is the poison. See docs/mcp.md, "Healing"."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING

from mcp.client.session import ClientSession

if TYPE_CHECKING:
    from .session import Session

POISON_CRASHES = 2
"""Deaths a call may be alone at (the only call in flight on the server) before it is taken for poison."""

_numbers = itertools.count()


class PoolCall:
    """One tool call through a server's sessions, across its tries: the deaths it was in flight at, those
    at which it was alone, and the group of suspects it runs in (``None``: it runs beside any call)."""

    def __init__(self) -> None:
        self.number = next(_numbers)  # halving goes by the order calls came in, the same for every member
        self.deaths = 0
        self.crashes = 0
        self.group: Group | None = None

    def join(self, group: Group | None) -> None:
        """Leave the group the call ran in, if any, for ``group`` (``None``: done, or beside any call)."""
        if self.group is not None:
            self.group.leave(self)
        self.group = group
        if group is not None:
            group.members.add(self)


class Group:
    """Suspects that run together on a session no other call uses (their seat), until a death splits them."""

    def __init__(self) -> None:
        self.members: set[PoolCall] = set()
        self.session: Session | None = None
        self.client: ClientSession | None = None
        self._seating = asyncio.Lock()

    async def seat(
        self, pick: Callable[[], Awaitable[tuple[Session, ClientSession]]]
    ) -> tuple[Session, ClientSession]:
        """The group's session, once no other call runs on it; the first member to come takes one with
        ``pick`` (a live session no group holds), holds back new calls and waits for its calls to finish."""
        async with self._seating:
            if self.session is None or self.session.client is not self.client:
                self.release()  # its session died: take a live one
                self.session, self.client = await _drained(pick)
            return self.session, self.client

    def leave(self, call: PoolCall) -> None:
        """``call`` is done here; the last member to leave gives the session back to every call."""
        self.members.discard(call)
        if not self.members:
            self.release()

    def release(self) -> None:
        """Give the seat back."""
        if self.session is not None:
            self.session.reserved = False
        self.session = self.client = None


async def _drained(
    pick: Callable[[], Awaitable[tuple[Session, ClientSession]]],
) -> tuple[Session, ClientSession]:
    """A session from ``pick``, reserved, once the calls in flight on it are done."""
    while True:
        session, client = await pick()
        session.reserved = True
        try:
            while session.in_flight and session.client is client:
                await asyncio.sleep(0.01)
        except BaseException:  # cancelled (the call timed out) before it sat: let other calls use it
            session.reserved = False
            raise
        if session.client is client:
            return session, client
        session.reserved = False  # it died while draining: take another


def judge(witnesses: Collection[PoolCall]) -> None:
    """Count a death at each call in flight at it and regroup them (once per death, by the first call
    to learn of it): a call alone there crashed the server; calls running in a group split into two
    halves, each a group of its own; among the others, those in flight at a second death (suspects) split
    likewise, and the rest keep running beside any call."""
    for call in witnesses:
        call.deaths += 1
        call.crashes += len(witnesses) == 1
    grouped = sorted((call for call in witnesses if call.group is not None), key=lambda call: call.number)
    suspects = sorted(
        (call for call in witnesses if call.group is None and call.deaths >= 2), key=lambda call: call.number
    )
    for calls in (grouped, suspects):
        half = (len(calls) + 1) // 2
        for part in (calls[:half], calls[half:]):
            group = Group()
            for call in part:
                call.join(group)
