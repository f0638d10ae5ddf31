"""The unit of a bare ``timeout``: milliseconds or seconds, as the file's client writes it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationInfo

from .notes import warn_once

# A bare ``timeout`` at or below this is seconds (Cline's range ends at one hour), above it milliseconds,
# unless the file's dialect says which (:func:`timeout_with_unit`). Between the two bounds below a value
# reads as a plausible timeout either way, so it is warned about.
TIMEOUT_SECONDS_MAX = 3600.0
_TIMEOUT_AMBIGUOUS = (100.0, 10_000.0)

# Keys of a server entry that only one family of clients writes, and so the unit of its bare ``timeout``:
# Gemini CLI and opencode write milliseconds; Roo Code and Kilo Code (like Cline) seconds.
_MS_ENTRY_KEYS = frozenset(
    {"httpUrl", "trust", "includeTools", "excludeTools", "authProviderType", "targetAudience",
     "targetServiceAccount", "environment"}
)  # fmt: skip
_SECONDS_ENTRY_KEYS = frozenset({"alwaysAllow", "watchPaths"})
# File names and folders that say the same: Cline's and Roo's settings files, Gemini CLI's folder.
_SECONDS_FILES = frozenset({"cline_mcp_settings.json", "mcp_settings.json"})
_SECONDS_FOLDERS = frozenset({".roo", ".kilocode"})
_MS_FOLDERS = frozenset({".gemini"})


def file_timeout_unit(data: dict[str, Any], gemini: bool, path: Path | None) -> Literal["s", "ms"] | None:
    """The unit a whole file's bare ``timeout`` values are in, when its shape or name says it."""
    if gemini or (isinstance(data.get("mcp"), dict) and data["mcp"]):  # Gemini CLI; opencode's server map
        return "ms"
    if path is not None:
        if path.name in _SECONDS_FILES or path.parent.name in _SECONDS_FOLDERS:
            return "s"
        if path.parent.name in _MS_FOLDERS or path.name.startswith("opencode."):
            return "ms"
    return None


def _entry_timeout_unit(entry: dict[str, Any]) -> Literal["s", "ms"] | None:
    """The unit one entry's bare ``timeout`` is in, when a key only one client writes says it."""
    if _SECONDS_ENTRY_KEYS & entry.keys():
        return "s"
    kind = entry.get("type")
    if _MS_ENTRY_KEYS & entry.keys() or isinstance(entry.get("command"), list) or kind in ("local", "remote"):
        return "ms"
    return None


def timeout_with_unit(
    name: str, entry: Any, file_unit: Literal["s", "ms"] | None, info: ValidationInfo
) -> Any:
    """``entry`` with a bare ``timeout`` renamed ``timeout_s`` or ``timeout_ms`` when the dialect says the
    unit; otherwise as it is (seconds up to 3600, milliseconds above), with a warning, once per file, server
    and value, when the value reads as a plausible timeout either way (``3000``: 50 min or 3 s?)."""
    if not isinstance(entry, dict) or "timeout" not in entry or {"timeout_s", "timeout_ms"} & entry.keys():
        return entry
    unit = _entry_timeout_unit(entry) or file_unit
    if unit is not None:
        entry = dict(entry)
        entry["timeout_s" if unit == "s" else "timeout_ms"] = entry.pop("timeout")
        return entry
    value = entry["timeout"]
    low, high = _TIMEOUT_AMBIGUOUS
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and low < value < high:
        read = f"{value:g} s" if value <= TIMEOUT_SECONDS_MAX else f"{value / 1000:g} s (milliseconds)"
        warn_once(
            info,
            logging.WARNING,
            f"MCP server {name!r}: the bare 'timeout: {value:g}' is read as {read}: clients differ (Cline and "
            "Roo write seconds, Gemini CLI and opencode milliseconds), and this file does not say which; "
            "write timeout_s or timeout_ms to say the unit",
        )
    return entry
