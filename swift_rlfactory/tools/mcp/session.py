"""One client session to an MCP server, owned by one long-lived task that enters and leaves the SDK's
transport and ``ClientSession`` (anyio context managers that must be entered and exited by the same task);
opening, closing and restarting it, and fetching its tool list again when the server says it changed."""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, Implementation, ListRootsResult, Root

from swift_rlfactory import __version__

from ..base import ToolSpec
from .config import McpServerConfig
from .errors import describe
from .listing import list_tools, undeclared_tools
from .mending import mended
from .transports import TransportContext, open_transport

logger = logging.getLogger(__package__)

# Notifications no one here uses: handled before the SDK spawns a task for each (see Session._consumed).
_UNUSED_NOTIFICATIONS = frozenset({"notifications/message", "notifications/progress"})

# Who we are to a server (the SDK would say "mcp" 0.1.0, its own placeholder).
_CLIENT_INFO = Implementation(name="swift-rlfactory", version=__version__)

# Beyond this a closing session's owner task is cancelled and abandoned, so that close() never hangs.
_CLOSE_TIMEOUT_S = 10.0


class Session:
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
        self._changed = 0  # list_changed notifications received
        self._listed = 0  # how many of them the list in ``tools`` reflects
        self._listing_done = asyncio.Event()  # set (and replaced) as each relisting ends
        self.in_flight: set[object] = set()  # the calls the server may be running now
        self.reserved = False  # held by a group of suspects (see .isolation): no other call is sent here
        self.unanswered = 0  # calls in a row given up on before the current client replied to any
        self.witnesses: dict[ClientSession, frozenset[object]] = {}
        self.error: BaseException | None = None
        self.link = TransportContext(label, config)  # what the transport sees of this session
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    @property
    def pid(self) -> int | None:
        """The process id of a live stdio server (``None`` for a remote one, or while none runs)."""
        process = self.link.process
        return process.pid if process is not None else None

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
                describe(exc, stdio=self.config.kind == "stdio"),
            )

    async def _own(self, ready: asyncio.Event, stop: asyncio.Event) -> None:
        kinds = ["streamable-http", "sse"] if self.kind == "auto" else [self.kind]
        failures: list[str] = []
        try:
            for kind in kinds:
                fallback = kind != kinds[-1]
                self.link.http_errors, self.notes = {}, []
                async with AsyncExitStack() as stack:
                    hung_up = asyncio.Event()
                    read, write = await stack.enter_async_context(open_transport(self.link, kind))
                    read = await stack.enter_async_context(
                        mended(read, self.link.http_errors, self.notes, hung_up, self._consumed)
                    )
                    roots = _roots_callback(self.roots) if self.roots else None
                    client = await stack.enter_async_context(
                        ClientSession(read, write, list_roots_callback=roots, client_info=_CLIENT_INFO)
                    )
                    try:
                        init = await client.initialize()
                    except MCPError as exc:
                        # Per the spec's backwards-compatibility rule, a 4xx to the initialize POST means
                        # "try the old HTTP+SSE transport at the same URL".
                        if not fallback or exc.code == CONNECTION_CLOSED:
                            raise exc from None
                        failures.append(f"streamable HTTP: {describe(exc)}")
                        continue
                    # Listing on every session, not just the first, also primes the SDK's per-session cache
                    # of output schemas; unprimed, the first concurrent calls would each list the tools again.
                    covers = self._changed
                    if init.capabilities.tools is not None:
                        tools = await list_tools(client, self.notes)
                    else:
                        tools = await undeclared_tools(client, self.notes)
                    self.tools = {spec.name: spec for spec in tools}
                    self.kind = kind
                    self.client, self.hung_up = client, hung_up
                    ready.set()
                    self._listed = covers
                    if self._changed > covers:  # the list changed while it was first fetched
                        self._start_relisting(client)
                    try:
                        await stop.wait()
                    finally:
                        self.client = None
                return
        except (
            Exception
        ) as exc:  # recorded for open() and the pool's pick(), which report it with the server's name
            self.error = RuntimeError("; ".join([*failures, f"SSE: {describe(exc)}"])) if failures else exc
        finally:
            self.client = None
            self.link.process = None
            ready.set()

    def _consumed(self, method: str) -> bool:
        """Whether a notification is handled here, before the SDK sees it: a changed tool list is fetched
        again (coalesced); log messages and progress have no use in a training run (the SDK would drop
        them, one task each). Any other notification goes on to the SDK."""
        if method == "notifications/tools/list_changed":
            self.tools_changed()
            return True
        return method in _UNUSED_NOTIFICATIONS

    def tools_changed(self) -> None:
        """The server says its tool list changed: list it again in a task of its own, which calls to the
        server wait for (:meth:`fresh`). However many notifications arrive, one listing is in flight and at
        most one more is pending: the one that starts after it, covering every notification seen by then."""
        self._changed += 1
        if self.client is not None and (self.relisting is None or self.relisting.done()):
            self._start_relisting(self.client)

    def _start_relisting(self, client: ClientSession) -> None:
        self.relisting = asyncio.create_task(self._relist(client), name=f"mcp-relist-{self.label}")

    async def fresh(self) -> None:
        """Wait until the tool list reflects every list_changed received so far (or relisting stops)."""
        target = self._changed
        while self._listed < target and self.relisting is not None and not self.relisting.done():
            await self._listing_done.wait()

    async def _relist(self, client: ClientSession) -> None:
        """Fetch the tool list of ``client`` again until it covers every change received; a failure keeps
        the list as it was."""
        try:
            while self._listed < self._changed and self.client is client:
                covers = self._changed
                tools = await self._listing(client)
                if tools is None or self.client is not client:
                    return  # failed (logged), or reopened meanwhile: the new session listed its tools itself
                added, removed = tools.keys() - self.tools.keys(), self.tools.keys() - tools.keys()
                if added or removed:
                    logger.info(
                        "MCP session %s: tools added %s, removed %s",
                        self.label,
                        sorted(added),
                        sorted(removed),
                    )
                self.tools, self._listed = tools, covers
                self._listing_done.set()
                self._listing_done = asyncio.Event()
        finally:
            self._listing_done.set()

    async def _listing(self, client: ClientSession) -> dict[str, ToolSpec] | None:
        try:
            return {spec.name: spec for spec in await list_tools(client, [])}
        except Exception as exc:
            if self.client is client:
                logger.warning(
                    "MCP session %s: its tool list changed, but listing it again failed (%s); keeping "
                    "the list it had",
                    self.label,
                    describe(exc, stdio=self.config.kind == "stdio"),
                )
            return None
        finally:
            self.notes.clear()  # what was mended in it: said once, at start-up


def _roots_callback(roots: tuple[Path, ...]) -> Any:
    """The answer to a server's ``roots/list``: each folder as a ``file://`` URI named by its last part."""
    result = ListRootsResult(roots=[Root(uri=root.as_uri(), name=root.name or str(root)) for root in roots])

    async def list_roots(context: Any) -> ListRootsResult:
        return result

    return list_roots
