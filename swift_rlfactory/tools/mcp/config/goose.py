"""Goose's ``config.yaml``: its ``extensions`` (told by shape from Gemini CLI's ``extensions`` settings),
written in our spelling; Goose's own extensions, which run inside goose, are skipped."""

from __future__ import annotations

import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

# Goose's own extensions (``type: builtin``, ``platform``, ...) run inside goose: nothing to start here.
GOOSE_OWN_TYPES = frozenset({"builtin", "platform", "frontend", "inline_python"})

_GOOSE_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def is_goose_extensions(block: Any) -> bool:
    """Whether a top-level ``extensions`` block is Goose's (entries that say how to start a server: a
    ``type``, a ``cmd`` or a ``uri``) rather than Gemini CLI's settings (``{"disabled": [...]}``)."""
    return isinstance(block, dict) and any(
        isinstance(entry, dict) and {"type", "cmd", "uri"} & entry.keys() for entry in block.values()
    )


_SWITCH = TypeAdapter(bool)  # how a server's ``enabled`` / ``disabled`` field reads a value


def goose_enabled(entry: dict[str, Any]) -> bool:
    """Whether a Goose extension is switched on, its ``enabled`` read as a server's ``enabled`` field reads
    it (``false``, ``"no"``, ``0``, ... are off); a value that field would refuse counts as on."""
    try:
        return _SWITCH.validate_python(entry.get("enabled", True))
    except ValidationError:
        return True


def goose_entry(name: str, entry: Any) -> Any:
    """A Goose extension in our spelling: its ``timeout`` is seconds, an empty ``available_tools`` means
    every tool, and a remote one's ``$VAR`` / ``${VAR}`` in ``uri`` and ``headers`` are its ``envs`` first
    (as Goose fills them; the others are then ours, :meth:`McpServerConfig.resolved`). ``cmd``, ``envs``,
    ``env_keys`` and ``uri`` are read as they are written (see the field aliases of
    :class:`McpServerConfig`), and ``type`` (``stdio``, ``streamable_http``, ``sse``) as any ``type``."""
    if not isinstance(entry, dict):
        return entry
    entry = dict(entry)
    envs = entry.get("envs")
    if isinstance(envs, dict) and envs:

        def fill(text: Any) -> Any:
            if not isinstance(text, str):
                return text
            return _GOOSE_VAR.sub(lambda m: str(envs.get(m[1] or m[2], m[0])), text)

        if "uri" in entry:
            entry["uri"] = fill(entry["uri"])
        if isinstance(entry.get("headers"), dict):
            entry["headers"] = {k: fill(v) for k, v in entry["headers"].items()}
    if entry.get("available_tools") == []:
        del entry["available_tools"]
    if (timeout := entry.pop("timeout", None)) is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise ValueError(f"extensions.{name}.timeout: must be a number of seconds")
        entry["timeout_s"] = timeout
    return entry
