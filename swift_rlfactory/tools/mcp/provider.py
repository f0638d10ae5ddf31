"""MCP servers as tool providers: one :class:`McpProvider` per entry of ``mcpServers``, its tools handed to
the executor with the server's own names, descriptions and input schemas. See docs/mcp.md."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swift_rlfactory.redaction import install_log_redaction, redact
from swift_rlfactory.runtime.json_api import sendable

from ..base import Tool, ToolSpec
from .config import McpConfig, McpServerConfig
from .errors import describe, endpoint
from .healing import SessionPool
from .leases import TrajectoryLeases
from .listing import schema_chars, warn_if_large
from .session import Session

logger = logging.getLogger(__package__)


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
        self.per_trajectory = provider.per_trajectory  # its results depend on the trajectory: never cached

    async def call(self, arguments: dict[str, Any]) -> Any:
        """Call the tool on the server; see :meth:`McpProvider.call_tool`."""
        return await self.provider.call_tool(self.spec.name, arguments)


class McpProvider:
    """Tools of one MCP server, reached through ``config.sessions`` parallel client sessions.

    A call goes to the live session with the fewest calls in flight; one provider serves every trajectory
    its process runs, so what a server remembers between calls is shared by all of them. With ``scope:
    trajectory`` each live trajectory has a session of its own instead (:class:`~.leases.TrajectoryLeases`),
    and the provider is a :class:`~..episode_state.PerTrajectory` backend of the episode lifecycle.

    Args:
        name: the server's key in ``mcpServers``; names it in errors and prefixes clashing tool names.
        config: how to start or reach the server (see :class:`~.config.McpServerConfig`).
        roots: folders the client advertises as MCP *roots* and lists when the server asks (``roots/list``),
            as an editor offers its workspace folder: server-filesystem started without a folder argument
            waits for them, and denies every access until it has some. None: no roots capability.
    """

    def __init__(self, name: str, config: McpServerConfig, roots: Sequence[Path] = ()):
        self.name = name
        self.config = config
        self.roots = tuple(Path(root).resolve() for root in roots)
        self._pool = SessionPool(name, config, [])
        self._leases = TrajectoryLeases(name, config, self.roots) if self.per_trajectory else None
        self._shown: frozenset[str] = frozenset()
        self._schema_chars = 0

    async def start(self) -> list[Tool]:
        """Open every session and list the server's tools; raises ``RuntimeError`` naming the server."""
        install_log_redaction()
        try:
            self.config.check_startable()
        except ValueError as exc:
            raise RuntimeError(redact(f"MCP server {self.name!r} cannot start: {exc}")) from None
        try:
            first = await self._open()
        except Exception as exc:
            await self.close()
            where, why = endpoint(self.config), describe(exc, stdio=self.config.kind == "stdio")
            raise RuntimeError(redact(f"MCP server {self.name!r} ({where}) failed to start: {why}")) from None
        for note in first.notes:  # every session lists the same tools: say it once
            logger.warning("MCP server %r: %s", self.name, note)
        offered = list(first.tools.values())
        try:
            kept = set(self.config.select_tools([spec.name for spec in offered]))
            reset = self.config.reset_tool
            if reset is not None and reset not in first.tools:
                raise ValueError(f"reset_tool names {reset!r}, which the server does not offer")
        except ValueError as exc:  # a filter naming a tool that is not there: fail now, naming the field
            await self.close()
            raise RuntimeError(f"MCP server {self.name!r}: {exc}") from None
        self._shown = frozenset(kept)
        tools = [McpTool(self, spec) for spec in offered if spec.name in kept]
        self._schema_chars = schema_chars(tool.spec for tool in tools)
        warn_if_large(self.name, [tool.spec for tool in tools])
        return tools

    async def _open(self) -> Session:
        """Open the shared sessions, or (scope trajectory) a first one to list the tools; the first one."""
        if self._leases is not None:
            return await self._leases.start()
        sessions = [Session(f"{self.name}#{i}", self.config, self.roots) for i in range(self.config.sessions)]
        self._pool = SessionPool(self.name, self.config, sessions)  # made on the running loop
        await asyncio.gather(*(session.open() for session in sessions))
        return sessions[0]

    @property
    def per_trajectory(self) -> bool:
        """Whether the entry says ``scope: trajectory``: a session of its own for each live trajectory."""
        return self.config.scope == "trajectory"

    def begin(self, key: str) -> None:
        """Trajectory ``key`` is live (scope trajectory): its first call takes a session of its own."""
        if self._leases is not None:
            self._leases.begin(key)

    async def end(self, key: str) -> None:
        """Trajectory ``key`` ended: its session is closed, or its process reset for the next lease."""
        if self._leases is not None:
            await self._leases.end(key)

    async def late_tool(self, name: str) -> Tool | None:
        """Tool ``name`` if the server began to offer it after start-up (it sent
        ``notifications/tools/list_changed``) on a live session and the config's filters let it through;
        else ``None``. A tool listing being fetched again is waited for (at most :data:`~.healing.RELIST_WAIT_S`)."""
        if name in self._shown or not self.config.allows_tool(name):
            return None
        await self._pool.relisted()
        for session in self._pool.sessions:
            spec = session.tools.get(name) if session.client is not None else None
            if spec is not None:
                return McpTool(self, spec)
        return None

    async def close(self) -> None:
        """Stop every session (terminating stdio servers) and any pending restart; safe to call twice."""
        await self._pool.close()
        if self._leases is not None:
            await self._leases.close()

    @property
    def schema_chars(self) -> int:
        """Characters the schemas of the tools shown to the model put into every prompt, once started
        (see :func:`~.listing.schema_chars`, which counts those of any tool specs)."""
        return self._schema_chars

    @property
    def pids(self) -> list[int]:
        """Process ids of the live stdio server processes (empty for remote servers)."""
        pids = [s.pid for s in self._pool.sessions if s.pid is not None]
        return pids + (self._leases.pids if self._leases is not None else [])

    @property
    def leases(self) -> TrajectoryLeases | None:
        """The per-trajectory sessions (scope trajectory), else ``None``."""
        return self._leases

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call ``name`` on the least-loaded live session, healing expired and dead sessions on the way.

        Returns the result's content blocks (rendered later by :func:`~..observation.render`), or its
        structured content when the server sent only that (the value itself when that is ``{"result":
        value}``, how SDK and FastMCP servers wrap a value that is no object). Raises :class:`ToolError` when
        the server answered with an error (or the call crashed the server twice by itself) and
        :class:`TransportError` when the server could not be reached. With ``scope: trajectory`` the call
        goes to the session of the trajectory whose calls run in this context (:meth:`.TrajectoryLeases.call`).
        """
        if self._leases is not None:
            return await self._leases.call(name, sendable(arguments))
        return await self._pool.call(name, sendable(arguments))
