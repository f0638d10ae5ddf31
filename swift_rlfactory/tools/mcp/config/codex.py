"""Codex CLI's ``~/.codex/config.toml``: ``[mcp_servers.NAME]`` tables, whose url is streamable HTTP (the
only HTTP transport Codex speaks), and its older ``startup_timeout_ms``."""

from __future__ import annotations

from typing import Any


def codex_server(server: Any) -> Any:
    """A ``[mcp_servers.NAME]`` table with its transport said: a url is streamable HTTP."""
    if isinstance(server, dict) and "url" in server:
        return {"transport": "streamable-http", **server}
    return server


def codex_startup_timeout(data: dict[str, Any]) -> None:
    """Codex's older ``startup_timeout_ms`` as our ``startup_timeout_s``, in place."""
    if "startup_timeout_ms" not in data:
        return
    value = data.pop("startup_timeout_ms")
    if {"startup_timeout_s", "startup_timeout_sec"} & data.keys():
        raise ValueError("give either 'startup_timeout_ms' or 'startup_timeout_sec', not both")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("'startup_timeout_ms' must be a number of milliseconds")
    data["startup_timeout_s"] = value / 1000
