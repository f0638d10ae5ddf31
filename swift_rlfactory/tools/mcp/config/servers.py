"""The servers of one config file or inline block (:class:`McpConfig`), gathered from every client's
top-level key into ``mcpServers``; errors name a server under the key its file wrote."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .codex import codex_server
from .editors import named_list
from .gemini import gemini_selected, gemini_server_lists, is_gemini_mcp_block
from .goose import GOOSE_OWN_TYPES, goose_enabled, goose_entry, is_goose_extensions
from .notes import logger, warn_once
from .server import McpServerConfig
from .timeouts import file_timeout_unit, timeout_with_unit

# Top-level keys that hold servers, in the order they are read: Codex's ``mcp_servers`` and Goose's
# ``extensions`` (told by shape from Gemini CLI's ``extensions`` settings: :func:`.goose.is_goose_extensions`).
SERVER_KEYS = ("mcpServers", "servers", "context_servers", "mcp", "mcp_servers", "extensions")


class McpConfig(BaseModel):
    """The servers of one config file or inline block, under ``mcpServers`` (enabled servers only)."""

    model_config = ConfigDict(extra="forbid")

    mcpServers: dict[str, McpServerConfig] = Field(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _named_as_written(cls, data: Any, handler: ModelWrapValidatorHandler[McpConfig]) -> McpConfig:
        """Errors name a server under the key its file wrote (``mcp_servers.docs.args``, ``servers.docs``),
        not under ``mcpServers``, where every client's servers are gathered."""
        try:
            return handler(data)
        except ValidationError as exc:
            under = _written_under(data)
            errors = []
            for error in exc.errors():
                loc = error["loc"]
                if len(loc) > 1 and loc[0] == "mcpServers" and loc[1] in under:
                    loc = (under[str(loc[1])], *loc[1:])
                detail = {"type": error["type"], "loc": loc, "input": error["input"]}
                errors.append({**detail, "ctx": error["ctx"]} if "ctx" in error else detail)
            raise ValidationError.from_exception_data(exc.title, errors) from None

    @model_validator(mode="before")
    @classmethod
    def _gather_servers(cls, data: Any, info: ValidationInfo) -> Any:
        """Collect servers from every client's top-level key; ignore the other top-level keys.

        ``info.context["path"]``, the file the data came from, if any, helps tell the unit of a bare
        ``timeout`` (a Gemini CLI ``settings.json`` writes milliseconds, a Roo ``mcp.json`` seconds)."""
        if not isinstance(data, dict):
            return data
        gemini = gemini_server_lists(data, info)
        servers = _servers(data, gemini is not None, info)
        _check_other_keys(data)
        if gemini is not None:
            servers = gemini_selected(servers, *gemini, info)
        file_unit = file_timeout_unit(data, gemini is not None, (info.context or {}).get("path"))
        return {
            "mcpServers": {name: timeout_with_unit(name, s, file_unit, info) for name, s in servers.items()}
        }

    @field_validator("mcpServers")
    @classmethod
    def _enabled_only(cls, servers: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in [n for n, s in servers.items() if s.disabled]:
            logger.info("MCP server %r is disabled in its config; skipping it", name)
        return {name: server for name, server in servers.items() if not server.disabled}


def _servers(data: dict[str, Any], gemini: bool, info: ValidationInfo) -> dict[str, Any]:
    """The server entries under every key of :data:`SERVER_KEYS`, by name; a name given twice fails."""
    servers: dict[str, Any] = {}
    goose_own: list[str] = []
    for key in SERVER_KEYS:
        block = data.get(key)
        if block is None or (key == "mcp" and gemini and is_gemini_mcp_block(block)):
            continue
        if key == "extensions":
            if not is_goose_extensions(block):  # Gemini CLI's extension settings
                logger.debug("MCP config: ignoring top-level key 'extensions'")
                continue
            goose_own += [
                n for n, e in block.items() if isinstance(e, dict) and e.get("type") in GOOSE_OWN_TYPES
            ]
            block = {n: goose_entry(n, e) for n, e in block.items() if n not in goose_own}
        if isinstance(block, list):  # Continue: [{"name": "sqlite", "command": ...}, ...]
            block = named_list(key, block)
        if not isinstance(block, dict):
            raise ValueError(f"'{key}' must map server names to servers, got {type(block).__name__}")
        for name, server in block.items():
            if name in servers:
                raise ValueError(f"server {name!r} is defined twice (again under '{key}')")
            servers[name] = codex_server(server) if key == "mcp_servers" else server
    if enabled_own := [n for n in goose_own if goose_enabled(data["extensions"][n])]:
        warn_once(
            info,
            logging.WARNING,
            f"MCP config: skipping Goose's own extensions {', '.join(map(repr, enabled_own))} (types "
            f"{'/'.join(sorted(GOOSE_OWN_TYPES))}): they run inside goose, not as MCP servers one can start",
        )
    return servers


def _check_other_keys(data: dict[str, Any]) -> None:
    """Top-level keys besides :data:`SERVER_KEYS` are ignored (a debug log), unless they hold servers."""
    for key, value in data.items():
        if key in SERVER_KEYS:
            continue
        if _is_server(value) or (isinstance(value, dict) and any(map(_is_server, value.values()))):
            raise ValueError(
                f"top-level key {key!r} holds MCP servers, but servers are read only under one of "
                f"{', '.join(SERVER_KEYS)}: write them as mcpServers: {{name: {{command: ...}}}}"
            )
        logger.debug("MCP config: ignoring top-level key %r", key)


def _written_under(data: Any) -> dict[str, str]:
    """The top-level key each server of a config file is written under (the first, for a name twice)."""
    under: dict[str, str] = {}
    if not isinstance(data, dict):
        return under
    for key in SERVER_KEYS:
        block = data.get(key)
        if isinstance(block, list):
            names = [e.get("name") for e in block if isinstance(e, dict)]
        else:
            names = list(block) if isinstance(block, dict) else []
        for name in names:
            if isinstance(name, str):
                under.setdefault(name, key)
    return under


def _is_server(value: Any) -> bool:
    """Whether ``value`` is written like one server entry (it says how to start or reach it)."""
    return isinstance(value, dict) and any(k in value for k in ("command", "url", "serverUrl", "httpUrl"))
