"""The standard ``{"mcpServers": {...}}`` configuration, validated.

This is the format Claude Desktop, Cursor and RL-Factory use, so a user's existing file drops in::

    {"mcpServers": {
        "units":  {"command": "python", "args": ["server.py"], "sessions": 2},
        "search": {"url": "http://127.0.0.1:8000/mcp"},
        "legacy": {"url": "http://127.0.0.1:8001/sse", "transport": "sse"}}}

A server with ``command`` is a stdio server (a subprocess we start and keep alive); one with ``url`` is
remote, spoken to over streamable HTTP unless ``transport``/``type`` says ``sse``. ``sessions`` opens that
many parallel client sessions, and calls go to the least loaded one. ``command: python`` means the Python
running swift-rlfactory, so a server sees the same installed packages. ``${VAR}`` in any string is
taken from the environment (for API keys in ``headers``, ports in ``url``, flags in ``args``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class McpServerConfig(BaseModel):
    """One entry of ``mcpServers``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    transport: Literal["stdio", "sse", "streamable-http", "http", "streamable_http"] | None = Field(
        default=None, alias="type"
    )
    headers: dict[str, str] = Field(default_factory=dict)
    sessions: int = Field(default=1, ge=1, le=64)
    startup_timeout_s: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _one_kind(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of 'command' (stdio server) or 'url' (remote server)")
        if self.command is not None and self.transport not in (None, "stdio"):
            raise ValueError(f"transport {self.transport!r} needs a 'url', not a 'command'")
        if self.url is not None and self.transport == "stdio":
            raise ValueError("transport 'stdio' needs a 'command', not a 'url'")
        return self

    @property
    def kind(self) -> Literal["stdio", "sse", "streamable-http"]:
        """Which client to open: ``stdio``, ``sse`` or ``streamable-http``."""
        if self.command is not None:
            return "stdio"
        return "sse" if self.transport == "sse" else "streamable-http"

    def resolved(self, base_dir: Path) -> McpServerConfig:
        """A copy with ``${VAR}`` expanded from the environment in every string field, and a working
        directory that defaults to ``base_dir`` (the environment file's folder)."""
        expand = os.path.expandvars
        update: dict = {
            "args": [expand(a) for a in self.args],
            "env": {k: expand(v) for k, v in self.env.items()},
            "headers": {k: expand(v) for k, v in self.headers.items()},
        }
        if self.url is not None:
            update["url"] = expand(self.url)
        if self.command is not None:
            update["command"] = expand(self.command)
            cwd = Path(expand(self.cwd)) if self.cwd else base_dir
            update["cwd"] = str(cwd if cwd.is_absolute() else (base_dir / cwd).resolve())
        return self.model_copy(update=update)


class McpConfig(BaseModel):
    """The whole ``{"mcpServers": {...}}`` object."""

    model_config = ConfigDict(extra="forbid")

    mcpServers: dict[str, McpServerConfig] = Field(default_factory=dict)
