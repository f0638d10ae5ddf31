"""The JSON dialects of editor and desktop clients (Claude Desktop and Code, Cursor, VS Code, Windsurf,
Cline, Roo/Kilo, Zed, Continue, opencode): their spellings of an entry's url, command and environment, and
Continue's list of named servers."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationInfo

from .notes import warn_once

ABSENT = object()  # a key the entry does not give (``None`` is YAML's empty value, and an error)


def url_spellings(data: dict[str, Any]) -> None:
    """Windsurf's ``serverUrl`` and Gemini CLI's ``httpUrl`` (streamable HTTP, unless a type says) as
    ``url``, in place."""
    for alias in ("serverUrl", "httpUrl"):
        if alias in data:
            if data.get("url") is not None:
                raise ValueError(f"give either 'url' or '{alias}', not both")
            data["url"] = data.pop(alias)
            if alias == "httpUrl" and not any(k in data for k in ("type", "transport", "transportType")):
                data["transport"] = "streamable-http"


def command_spellings(data: dict[str, Any], info: ValidationInfo) -> None:
    """opencode's ``environment`` and list ``command``, and older Zed's nested ``command`` (``path``,
    ``args``, ``env``), as ``command``, ``args`` and ``env``, in place."""
    if "environment" in data and "env" not in data:  # opencode
        data["env"] = data.pop("environment")
    command = data.get("command")
    if isinstance(command, dict):  # older Zed: "command": {"path", "args", "env"}
        nested = dict(command)
        data["command"] = nested.pop("path", None)
        for key in ("args", "env"):
            if key in nested:
                data[key] = joined(f"command.{key}", nested.pop(key), data.get(key, ABSENT))
        for key in nested:
            warn_once(
                info, logging.WARNING, f"MCP config: ignoring unknown key {key!r} of the nested 'command'"
            )
    elif isinstance(command, list):  # opencode: "command": ["npx", "-y", "server"]
        data["command"], *args = command or [None]
        data["args"] = joined("command", args, data.get("args", ABSENT))


def joined(where: str, given: Any, own: Any) -> Any:
    """``args`` or ``env`` from a nested or list ``command`` (``given``) joined before the entry's ``own``
    value of that key. ``given`` of the wrong type fails naming ``where``; an ``own`` of the wrong type is
    left for the field's validation to name."""
    kind = dict if where.endswith("env") else list
    if not isinstance(given, kind):
        what = "a mapping of names to values" if kind is dict else "a list of strings"
        raise ValueError(
            f"'{where}' must be {what}, got {'nothing' if given is None else type(given).__name__}"
        )
    if own is ABSENT:
        return given
    if isinstance(own, dict) and kind is dict:
        return {**given, **own}
    if isinstance(own, list) and kind is list:
        return [*given, *own]
    return own


def named_list(key: str, entries: list[Any]) -> dict[str, Any]:
    """Continue's ``[{"name": "sqlite", "command": ...}, ...]`` as a map of names to servers."""
    servers: dict[str, Any] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ValueError(f"'{key}[{i}]' must be a server with a 'name'")
        entry = dict(entry)
        name = entry.pop("name")
        if name in servers:
            raise ValueError(f"server {name!r} is defined twice in '{key}'")
        servers[name] = entry
    return servers
