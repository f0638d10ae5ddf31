"""Gemini CLI's ``settings.json``: its ``mcp`` block (``allowed``, ``excluded``) and the older top-level
``allowMCPServers`` / ``excludeMCPServers`` choose which of the file's servers start."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationInfo

from .notes import logger, warn_once

# Gemini CLI's settings.json has a global ``mcp`` block beside ``mcpServers``: which servers to connect to.
# opencode's ``mcp`` maps names to servers instead; the shape tells them apart (no value here is a server).
_GEMINI_MCP_KEYS = frozenset({"allowed", "excluded", "serverCommand"})
_GEMINI_OLD_KEYS = {"allowMCPServers": "allowed", "excludeMCPServers": "excluded"}  # settings.json before v2


def is_gemini_mcp_block(block: Any) -> bool:
    """Whether an ``mcp`` block is Gemini CLI's global settings rather than opencode's server map."""
    return (
        isinstance(block, dict)
        and bool(block)
        and set(block) <= _GEMINI_MCP_KEYS
        and not any(isinstance(v, dict) for v in block.values())
    )


def gemini_server_lists(
    data: dict[str, Any], info: ValidationInfo
) -> tuple[list[str] | None, list[str]] | None:
    """Gemini CLI's ``mcp.allowed`` and ``mcp.excluded`` (or the older top-level ``allowMCPServers`` and
    ``excludeMCPServers``), or ``None`` when the file has neither. Each must be a list of server names."""
    block = data.get("mcp")
    if isinstance(block, dict) and not is_gemini_mcp_block(block):
        if mixed := sorted(k for k in _GEMINI_MCP_KEYS & set(block) if not isinstance(block[k], dict)):
            raise ValueError(
                f"'mcp' mixes Gemini CLI's settings ({', '.join(mixed)}) with opencode's servers: a file "
                "is one client's; Gemini CLI's servers go under mcpServers"
            )
        block = None
    lists: dict[str, Any] = {}
    if block is not None:
        if "serverCommand" in block:
            warn_once(
                info,
                logging.WARNING,
                "MCP config: ignoring Gemini CLI's mcp.serverCommand (start servers from mcpServers)",
            )
        lists.update({f"mcp.{k}": block[k] for k in ("allowed", "excluded") if k in block})
    lists.update({old: data[old] for old in _GEMINI_OLD_KEYS if old in data})
    if block is None and not lists:
        return None
    for key, value in lists.items():
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"'{key}' must be a list of server names")
    allowed = [n for k, v in lists.items() if k in ("mcp.allowed", "allowMCPServers") for n in v]
    given = any(k in lists for k in ("mcp.allowed", "allowMCPServers"))
    excluded = [n for k, v in lists.items() if k in ("mcp.excluded", "excludeMCPServers") for n in v]
    return (allowed if given else None), excluded


def gemini_selected(
    servers: dict[str, Any], allowed: list[str] | None, excluded: list[str], info: ValidationInfo
) -> dict[str, Any]:
    """The servers Gemini CLI would connect to: those ``allowed`` names (all when it is not given) that
    ``excluded`` does not. A name the file does not define is logged (a warning for ``allowed``), not fatal:
    these lists live in a user's global settings and may name servers of other projects."""
    for field, names in (("mcp.allowed", allowed or []), ("mcp.excluded", excluded)):
        unknown = [n for n in names if n not in servers]
        if unknown:
            level = logging.WARNING if field == "mcp.allowed" else logging.INFO  # excluding more is harmless
            warn_once(info, level, f"MCP config: {field} names servers this file does not define: {unknown}")
    kept = {}
    for name, server in servers.items():
        if (allowed is not None and name not in allowed) or name in excluded:
            logger.info(
                "MCP server %r is left out by Gemini CLI's mcp.allowed/mcp.excluded; skipping it", name
            )
        else:
            kept[name] = server
    return kept
