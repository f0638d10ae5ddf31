"""One server entry in every client's spelling mapped onto ours: UI-only keys dropped, tool filters,
transport names, and numbers where text is meant; the dialects' own spellings come from their readers."""

from __future__ import annotations

import logging
import math
import re
from typing import Any, Literal

from pydantic import AliasChoices, ValidationInfo
from pydantic.fields import FieldInfo

from .codex import codex_startup_timeout
from .editors import command_spellings, url_spellings
from .notes import logger, warn_once

Transport = Literal["stdio", "sse", "streamable-http"]

# Keys a client UI writes for itself: they change nothing about how a server is started or spoken to.
UI_ONLY_KEYS = frozenset(
    {
        "autoApprove", "alwaysAllow", "description", "icon", "name", "title", "source", "trust", "dev", "gallery", "version", "notes",
        "settings", "networkTimeout", "$schema", "display_name", "bundled", "required", "tools",
        "default_tools_approval_mode", "scopes", "oauth_resource",
    }
)  # fmt: skip

# Which tools of a server the model may see: Gemini CLI's allowlist ``includeTools`` and denylist
# ``excludeTools``, Roo/Kilo's ``disabledTools``, Codex's ``enabled_tools`` /
# ``disabled_tools``, Goose's ``available_tools`` (an allowlist where ``[]`` means every tool). A tool on
# any denylist is out, whatever the allowlist says (Gemini: exclude wins).
ALLOW_KEYS = ("includeTools", "enabled_tools", "available_tools")
DENY_KEYS = ("excludeTools", "disabledTools", "disabled_tools")

_TRANSPORTS: dict[str, Transport | None] = {
    "stdio": "stdio",
    "local": "stdio",
    "sse": "sse",
    "http": "streamable-http",
    "streamablehttp": "streamable-http",
    "streamable": "streamable-http",
    "remote": None,  # opencode: a url, transport negotiated
}


def client_spellings(
    data: dict[str, Any], info: ValidationInfo, fields: dict[str, FieldInfo]
) -> dict[str, Any]:
    """A copy of entry ``data`` in our spelling, for a model with ``fields``; unknown keys dropped with a
    warning (a typo may hide there), UI-only ones with a debug log."""
    data = dict(data)
    _oauth_spelling(data)
    for key in [k for k in data if k in UI_ONLY_KEYS]:
        logger.debug("MCP config: ignoring UI-only key %r", key)
        del data[key]
    for field in fields.values():
        if isinstance(field.validation_alias, AliasChoices):
            given = [c for c in field.validation_alias.choices if isinstance(c, str) and c in data]
            if len(given) > 1:
                raise ValueError(f"give either {' or '.join(map(repr, given))}, not both")
    codex_startup_timeout(data)
    _tool_filters(data)
    url_spellings(data)
    spellings = [data.pop(k) for k in ("type", "transportType", "transport") if k in data]
    if spellings:
        data["transport"] = transport(spellings[0])
    command_spellings(data, info)
    _as_text(data)
    for key in [k for k in data if k not in _known(fields)]:
        warn_once(info, logging.WARNING, f"MCP config: ignoring unknown server key {key!r}")
        del data[key]
    return data


def _oauth_spelling(data: dict[str, Any]) -> None:
    """Gemini CLI's and Claude Code's ``oauth`` object as our ``auth``, in place; Gemini's
    ``enabled: false`` (or ``oauth: false``) is no OAuth, ``oauth: true`` the defaults. Its keys are read by :class:`~..oauth.settings.OAuthSettings`."""
    if "oauth" not in data:
        return
    if "auth" in data:
        raise ValueError("give either 'auth' or 'oauth', not both")
    oauth = data.pop("oauth")
    if oauth is False or (isinstance(oauth, dict) and oauth.get("enabled", True) is False):
        return
    data["auth"] = "oauth" if oauth is True else oauth


def _tool_filters(data: dict[str, Any]) -> None:
    """Every client's allowlist as ``include_tools`` and denylists as ``exclude_tools``, in place."""
    allows = [k for k in ALLOW_KEYS if k in data]
    if len(allows) > 1:
        raise ValueError(f"give one of {' or '.join(map(repr, allows))}, not both: they are one allowlist")
    if allows:
        data["include_tools"] = joined_lists([(allows[0], data.pop(allows[0]))])
    denies = [(k, data.pop(k)) for k in DENY_KEYS if k in data]
    if denies:
        data["exclude_tools"] = joined_lists(denies)


def _as_text(data: dict[str, Any]) -> None:
    """Numbers and booleans in ``args``, ``env`` and ``headers`` as text, in place."""
    if isinstance(data.get("args"), list):
        data["args"] = [scalar_text(v) for v in data["args"]]
    for key in ("env", "envs", "headers", "http_headers"):
        if isinstance(data.get(key), dict):
            data[key] = {k: scalar_text(v) for k, v in data[key].items()}


def _known(fields: dict[str, FieldInfo]) -> set[str]:
    """Every key a model with ``fields`` reads: names, aliases and each alias choice."""
    known = {*fields, *(f.alias for f in fields.values() if f.alias)}
    return known | {
        choice
        for f in fields.values()
        if isinstance(f.validation_alias, AliasChoices)
        for choice in f.validation_alias.choices
        if isinstance(choice, str)
    }


def transport(spelling: Any) -> Transport | None:
    """Our name of a ``type`` / ``transport`` / ``transportType`` in any client's spelling."""
    if spelling is None:
        return None
    key = re.sub(r"[-_\s]", "", str(spelling)).lower()
    if key not in _TRANSPORTS:
        raise ValueError(
            f"type/transport {spelling!r} is not one of stdio, sse, http, streamable-http (any spelling)"
        )
    return _TRANSPORTS[key]


def scalar_text(value: Any) -> Any:
    """YAML and JSON numbers and booleans where a string is meant (``PORT: 8000``) become strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and not (isinstance(value, float) and not math.isfinite(value)):
        return str(value)
    return value


def joined_lists(given: list[tuple[str, Any]]) -> list[str]:
    """The tool names of every denylist given (``excludeTools`` and ``disabledTools`` may both be there),
    in order; one that is not a list of strings fails naming its key."""
    names: list[str] = []
    for key, value in given:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"'{key}' must be a list of tool names")
        names += [v for v in value if v not in names]
    return names
