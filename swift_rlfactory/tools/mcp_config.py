"""MCP server configuration as real clients write it, validated.

A file written for Claude Desktop, Claude Code, Cursor, VS Code, Windsurf, Cline, Roo/Kilo, Continue, Zed,
Gemini CLI, opencode, Codex CLI (``~/.codex/config.toml``) or Goose (``~/.config/goose/config.yaml``) drops
in::

    {"mcpServers": {
        "units":  {"command": "python", "args": ["server.py"], "sessions": 2},
        "search": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "legacy": {"url": "http://127.0.0.1:8001/sse", "type": "sse", "timeout": 60}}}

What is accepted, and how it is read:

* **Where the servers are**: ``mcpServers`` (Claude, Cursor, Windsurf, Cline, ...), ``servers`` (VS Code's
  ``mcp.json``), ``context_servers`` (Zed), ``mcp`` (opencode), ``[mcp_servers.NAME]`` tables (Codex),
  ``extensions`` (Goose; told by shape from Gemini CLI's ``extensions`` settings), or a list of
  ``{"name": ..., ...}`` entries (Continue). Goose's own extensions (``type: builtin``, ``platform``, ...:
  ``developer``, ``todo``) run inside goose, so they are skipped with a warning naming them. Errors name a
  server under the key its file wrote (``mcp_servers.docs.args``). Gemini CLI's ``settings.json`` also has
  an ``mcp`` block, of settings rather than servers (told apart by shape: none of its values is a server):
  its ``allowed`` and ``excluded`` lists (and the older top-level ``allowMCPServers`` /
  ``excludeMCPServers``) choose which of the file's servers start. Other top-level keys (``globalShortcut``, VS Code's ``inputs``, ...) are ignored with
  a debug log (Codex's ``model``, ``approval_policy``, ``[profiles.*]``, Goose's ``GOOSE_MODEL``, ...),
  unless they hold servers (``mcpServer:``, a server without the wrapper): that fails, naming the key,
  rather than start a run with no tools. The file may be JSON with comments and trailing commas (VS Code,
  Zed), YAML or TOML (``.toml``, Codex), with or without a UTF-8 byte order mark.
* **Kind**: ``command`` (a string, or opencode's list; Goose's ``cmd``) starts a stdio server; ``url`` (or
  Windsurf's ``serverUrl``, Gemini CLI's ``httpUrl``, Goose's ``uri``) reaches a remote one, and a Codex
  url is streamable HTTP, the only one Codex speaks. ``type`` / ``transport`` /
  ``transportType`` in any spelling (``stdio``, ``sse``, ``http``, ``streamable-http``,
  ``streamableHttp``, ``streamable_http``, ``local``, ``remote``) pins the transport; a url without one
  tries streamable HTTP and falls back to the older HTTP+SSE transport, as the MCP specification's
  backwards-compatibility section says a client should.
* **Environment**: ``env`` (Goose's ``envs``), and VS Code's ``envFile`` (a dotenv file; ``env`` wins).
  Goose's ``env_keys`` and Codex's ``env_vars`` name variables of our environment passed through to the
  server (an ``env`` value wins); an unset one fails at load naming the field and the variable.
* **Headers** (remote servers): ``headers`` (Codex's ``http_headers``), and Codex's ``env_http_headers``
  (header -> the name of the variable holding its value) and ``bearer_token_env_var`` (the name of the
  variable holding the token sent as ``Authorization: Bearer ...``), which win over a static header of
  that name in any case. Their values are secrets; an unset variable fails at load naming the field
  (``bearer_token_env_var``, ``env_http_headers.X-Key``), and a value that is no variable name fails
  without being shown (a token pasted where its variable's name belongs).
* **Switches**: ``disabled: true`` (or Zed/opencode's ``enabled: false``) skips the server; both take a
  boolean or ``"true"``/``"false"``/``"yes"``/``"no"``/``"on"``/``"off"``/``1``/``0``, anything else fails
  naming the field, and so do the two given with opposite meanings.
* **Tools**: Gemini CLI's ``includeTools`` (an allowlist) and ``excludeTools`` (a denylist, which wins),
  Roo/Kilo's ``disabledTools`` (a denylist), Codex's ``enabled_tools`` / ``disabled_tools`` and Goose's
  ``available_tools`` (an allowlist; ``[]`` there means every tool) choose which
  of the server's tools the model sees; the others are never listed nor callable. A name the server does
  not offer fails start-up naming the field (:meth:`McpServerConfig.select_tools`).
* **Timeout**: ``timeout_s`` (seconds) or ``timeout_ms`` say their unit. A bare ``timeout`` is in the unit
  of the file's client where its shape or name tells: milliseconds for Gemini CLI (``.gemini/``, its
  ``mcp`` block, ``httpUrl``, ``trust``, ``includeTools``, ...) and opencode (``opencode.json``, ``type:
  local|remote``, a list ``command``); seconds for Cline (``cline_mcp_settings.json``) and Roo/Kilo
  (``mcp_settings.json``, ``.roo/``, ``alwaysAllow``). Otherwise it means seconds up to 3600 and
  milliseconds above (``60000``), with a warning naming the server when the value reads as a plausible
  timeout either way (above 100 and below 10000); Goose's is seconds. It becomes the per-call timeout of
  the server's tools, as Codex's ``tool_timeout_sec`` does; Codex's ``startup_timeout_sec`` (and the older
  ``startup_timeout_ms``) is our ``startup_timeout_s``.
* **Ours**: ``sessions`` (parallel client sessions; calls go to the least loaded), ``startup_timeout_s``,
  ``inherit_env`` (give a stdio server our whole environment; by default it gets the MCP SDK's safe
  variables - ``HOME``, ``PATH``, ``USER``, ... - plus :data:`PASSTHROUGH_ENV` plus its ``env:``),
  ``max_result_mb`` (a larger result becomes an error observation, read no further), ``roots`` (the
  folders the server is told of as its MCP roots, answering its ``roots/list``: paths, taken from the
  workspace folder, or ``file://`` URIs; by default the folders a stdio server's arguments name, else the
  environment's folder; ``[]`` for none; a root that is not a folder fails at load naming ``roots[i]``).
* **UI-only keys** (``autoApprove``, ``alwaysAllow``, ``trust``, ``description``, ``icon``, Goose's
  ``bundled`` and ``display_name``, Codex's ``required``, ``tools`` approvals, ...)
  are ignored with a debug log, and so is any other unknown key (with a warning naming it, since a typo
  may hide there). Wrong values of known keys fail at start-up naming the field.

``command: python`` means the Python running swift-rlfactory, so a server sees the same installed
packages. ``${VAR}``, Claude Code's ``${VAR:-default}``, VS Code's ``${env:VAR}`` and opencode's
``{env:VAR}`` in ``command``, ``args``, ``env``, ``envFile``, ``cwd``, ``url`` and ``headers`` are taken from
the environment (:func:`~swift_rlfactory.redaction.expand`); an unset one without a default fails at load
naming the field and the variable, as Claude Code fails to parse such a file. A header is sent without
surrounding whitespace (a token read with its newline); a line break inside one fails at load naming it.
Windsurf's ``${file:PATH}``
there is the file's content, stripped (a key kept in a file: ``"Bearer ${file:~/.keys/search}"``); a
relative path is taken from the folder ``${workspaceFolder}`` names, and a file that cannot be read fails
at load naming the field and the path. ``${workspaceFolder}`` (and the folder relative paths and a default
``cwd`` start from) is the config file's folder, or the project folder above it for a file a client keeps
in its own folder (``proj/.vscode/mcp.json`` -> ``proj``; :func:`workspace_folder`); ``~`` in ``cwd`` is the
home folder; a ``cwd`` that is not a folder and a ``command`` that names no program fail at load naming
the field (:meth:`McpServerConfig.check_startable`). VS Code's
other path variables (``${userHome}``, ``${pathSeparator}``, ``${/}``, ``${workspaceFolderBasename}``)
mean what they mean there; ``${input:...}`` (a prompt in the editor), ``${command:...}`` and
``${config:...}`` fail at load, since nothing answers them in a training run. Expanded values that are
secrets - all of those in ``url`` and ``headers``, in an ``env:`` entry or after a ``--flag`` named like a
credential, and elsewhere those named like one (``${API_KEY}``) or shaped like a key - are shown as
``${VAR}`` in errors, logs and observations; a folder or a mode is shown as it is (see
:mod:`swift_rlfactory.redaction`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shlex
import shutil
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit
from urllib.request import url2pathname

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from swift_rlfactory import redaction
from swift_rlfactory.env import yaml_errors

logger = logging.getLogger(__name__)

Transport = Literal["stdio", "sse", "streamable-http"]

# Keys a client UI writes for itself: they change nothing about how a server is started or spoken to.
UI_ONLY_KEYS = frozenset(
    {
        "autoApprove", "alwaysAllow", "description", "icon", "name", "title", "source", "trust", "dev", "gallery", "version", "notes",
        "settings", "oauth", "networkTimeout", "$schema", "display_name", "bundled", "required", "tools",
        "default_tools_approval_mode", "scopes", "oauth_resource",
    }
)  # fmt: skip

# Top-level keys that hold servers, in the order they are read: Codex's ``mcp_servers`` and Goose's
# ``extensions`` (told by shape from Gemini CLI's ``extensions`` settings: :func:`_is_goose_extensions`).
SERVER_KEYS = ("mcpServers", "servers", "context_servers", "mcp", "mcp_servers", "extensions")

# Goose's own extensions (``type: builtin``, ``platform``, ...) run inside goose: nothing to start here.
_GOOSE_OWN_TYPES = frozenset({"builtin", "platform", "frontend", "inline_python"})

# What names an environment variable: Codex's ``bearer_token_env_var`` and ``env_http_headers``, Goose's
# ``env_keys`` and Codex's ``env_vars`` hold names, never values.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GOOSE_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")

# Besides the MCP SDK's safe set, a stdio server sees these: they make ``python`` mean this Python and
# keep it offline and in our cache, give it the GPUs we were given, and let it through the proxy and
# certificates this machine needs. Only a proxy URL may hold a credential; mcp._server_env records it.
PASSTHROUGH_ENV = (
    "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ",
    "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "RLFACTORY_CACHE", "CUDA_VISIBLE_DEVICES",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
)  # fmt: skip

# A bare ``timeout`` at or below this is seconds (Cline's range ends at one hour), above it milliseconds,
# unless the file's dialect says which (:func:`_timeout_with_unit`). Between the two bounds below a value
# reads as a plausible timeout either way, so it is warned about.
_TIMEOUT_SECONDS_MAX = 3600.0
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

# What was warned about, by the file it is in: a file is read anew by each load (the dataset's check, then
# the run), and each of its problems is told once; the same problem in another file is told again.
_warned: set[tuple[str, str]] = set()


def _warn_once(info: ValidationInfo, level: int, message: str) -> None:
    """Log ``message`` unless it was logged for the same config file before; the file is the validation
    context's ``path`` (an ``mcp_config`` file) or ``source`` (the environment file of an inline block)."""
    context = info.context or {}
    where = str(context.get("path") or context.get("source") or "")
    if (where, message) not in _warned:
        _warned.add((where, message))
        logger.log(level, message)


# Which tools of a server the model may see: Gemini CLI's allowlist ``includeTools`` and denylist
# ``excludeTools``, Roo/Kilo's ``disabledTools``, Codex's ``enabled_tools`` /
# ``disabled_tools``, Goose's ``available_tools`` (an allowlist where ``[]`` means every tool). A tool on
# any denylist is out, whatever the allowlist says (Gemini: exclude wins).
PYTHON_COMMANDS = ("python", "python3")  # started as this interpreter, sys.executable (mcp.py)
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


class McpServerConfig(BaseModel):
    """One server entry; the module docstring lists every accepted key."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    # A second spelling (Goose's ``cmd``, Codex's ``startup_timeout_sec``, ...) is named as written in errors.
    command: str | None = Field(default=None, validation_alias=AliasChoices("command", "cmd"))
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, validation_alias=AliasChoices("env", "envs"))
    env_file: str | None = Field(default=None, alias="envFile")
    env_vars: list[str] = Field(default_factory=list, validation_alias=AliasChoices("env_vars", "env_keys"))
    cwd: str | None = None
    url: str | None = Field(default=None, validation_alias=AliasChoices("url", "uri"))
    transport: Transport | None = None
    headers: dict[str, str] = Field(
        default_factory=dict, validation_alias=AliasChoices("headers", "http_headers")
    )
    bearer_token_env_var: str | None = None  # Codex: sent as ``Authorization: Bearer <its value>``
    env_http_headers: dict[str, str] = Field(default_factory=dict)  # Codex: header -> variable name
    sessions: int = Field(default=1, ge=1, le=64)
    startup_timeout_s: float = Field(
        default=30.0,
        gt=0,
        allow_inf_nan=False,
        validation_alias=AliasChoices("startup_timeout_s", "startup_timeout_sec"),
    )
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        validation_alias=AliasChoices("timeout_s", "tool_timeout_sec"),
    )
    timeout_ms: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    disabled: bool = False
    enabled: bool = True  # Zed, opencode: ``enabled: false`` is ``disabled: true``
    inherit_env: bool = False
    max_result_mb: float = Field(default=32.0, gt=0, allow_inf_nan=False)
    include_tools: list[str] | None = None  # None: every tool; see ALLOW_KEYS
    exclude_tools: list[str] = Field(default_factory=list)  # see DENY_KEYS
    roots: list[str] | None = None  # None: folders in args, else the env's folder (mcp._roots); []: none

    @model_validator(mode="before")
    @classmethod
    def _client_spellings(cls, data: Any, info: ValidationInfo) -> Any:
        """Map every client's spelling onto ours; drop UI-only keys."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key in [k for k in data if k in UI_ONLY_KEYS]:
            logger.debug("MCP config: ignoring UI-only key %r", key)
            del data[key]
        for field in cls.model_fields.values():
            if isinstance(field.validation_alias, AliasChoices):
                given = [c for c in field.validation_alias.choices if isinstance(c, str) and c in data]
                if len(given) > 1:
                    raise ValueError(f"give either {' or '.join(map(repr, given))}, not both")
        if "startup_timeout_ms" in data:  # Codex's older spelling
            value = data.pop("startup_timeout_ms")
            if {"startup_timeout_s", "startup_timeout_sec"} & data.keys():
                raise ValueError("give either 'startup_timeout_ms' or 'startup_timeout_sec', not both")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError("'startup_timeout_ms' must be a number of milliseconds")
            data["startup_timeout_s"] = value / 1000
        allows = [k for k in ALLOW_KEYS if k in data]
        if len(allows) > 1:
            raise ValueError(
                f"give one of {' or '.join(map(repr, allows))}, not both: they are one allowlist"
            )
        if allows:
            data["include_tools"] = _joined_lists([(allows[0], data.pop(allows[0]))])
        denies = [(k, data.pop(k)) for k in DENY_KEYS if k in data]
        if denies:
            data["exclude_tools"] = _joined_lists(denies)
        for alias in ("serverUrl", "httpUrl"):
            if alias in data:
                if data.get("url") is not None:
                    raise ValueError(f"give either 'url' or '{alias}', not both")
                data["url"] = data.pop(alias)
                if alias == "httpUrl" and not any(k in data for k in ("type", "transport", "transportType")):
                    data["transport"] = "streamable-http"
        spellings = [data.pop(k) for k in ("type", "transportType", "transport") if k in data]
        if spellings:
            data["transport"] = _transport(spellings[0])
        if "environment" in data and "env" not in data:  # opencode
            data["env"] = data.pop("environment")
        command = data.get("command")
        if isinstance(command, dict):  # older Zed: "command": {"path", "args", "env"}
            nested = dict(command)
            data["command"] = nested.pop("path", None)
            for key in ("args", "env"):
                if key in nested:
                    data[key] = _joined(f"command.{key}", nested.pop(key), data.get(key, _ABSENT))
            for key in nested:
                _warn_once(
                    info, logging.WARNING, f"MCP config: ignoring unknown key {key!r} of the nested 'command'"
                )
        elif isinstance(command, list):  # opencode: "command": ["npx", "-y", "server"]
            data["command"], *args = command or [None]
            data["args"] = _joined("command", args, data.get("args", _ABSENT))
        for key in ("args",):
            if isinstance(data.get(key), list):
                data[key] = [_scalar_text(v) for v in data[key]]
        for key in ("env", "envs", "headers", "http_headers"):
            if isinstance(data.get(key), dict):
                data[key] = {k: _scalar_text(v) for k, v in data[key].items()}
        known = {*cls.model_fields, *(f.alias for f in cls.model_fields.values() if f.alias)}
        known |= {
            choice
            for f in cls.model_fields.values()
            if isinstance(f.validation_alias, AliasChoices)
            for choice in f.validation_alias.choices
        }
        for key in [k for k in data if k not in known]:
            _warn_once(info, logging.WARNING, f"MCP config: ignoring unknown server key {key!r}")
            del data[key]
        return data

    @field_validator("bearer_token_env_var")
    @classmethod
    def _variable_name(cls, value: str | None) -> str | None:
        # The value is not shown: a token pasted here instead of its variable's name is a secret.
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError(
                "must name an environment variable (letters, digits, _) that holds the token, not the token"
            )
        return value

    @field_validator("env_http_headers", "env_vars")
    @classmethod
    def _variable_names(cls, value: Any) -> Any:
        names = value.values() if isinstance(value, dict) else value
        if bad := [n for n in names if not _ENV_NAME.fullmatch(n)]:
            raise ValueError(f"{len(bad)} value(s) are no environment variable names (letters, digits, _)")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> McpServerConfig:
        if "enabled" in self.model_fields_set:
            if "disabled" in self.model_fields_set and self.disabled == self.enabled:
                raise ValueError("'enabled' and 'disabled' disagree: give one of them")
            self.disabled = not self.enabled
        self.enabled = not self.disabled
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of 'command' (stdio server) or 'url' (remote server)")
        for key in ("command", "url"):
            if getattr(self, key) is not None and not getattr(self, key).strip():
                raise ValueError(f"'{key}' is empty")
        if self.command is not None and self.transport not in (None, "stdio"):
            raise ValueError(f"transport {self.transport!r} needs a 'url', not a 'command'")
        if self.url is not None and self.transport == "stdio":
            raise ValueError("transport 'stdio' needs a 'command', not a 'url'")
        return self

    @property
    def kind(self) -> Literal["stdio", "sse", "streamable-http", "auto"]:
        """Which client to open; ``auto`` is a url without a transport: streamable HTTP, else SSE."""
        if self.command is not None:
            return "stdio"
        return self.transport or "auto"

    @property
    def call_timeout_s(self) -> float | None:
        """The per-call timeout this entry asks for, in seconds, or ``None`` for the run's default."""
        if self.timeout_s is not None:
            return self.timeout_s
        if self.timeout_ms is not None:
            return self.timeout_ms / 1000
        if self.timeout is not None:
            return self.timeout if self.timeout <= _TIMEOUT_SECONDS_MAX else self.timeout / 1000
        return None

    def check_startable(self) -> None:
        """Fail, naming the field, for a server that cannot start as written: a ``url`` that is not http(s)
        (``localhost:8000/mcp``, ``ws://...``); for a stdio server a ``cwd`` that is not a folder (the OS
        would report it as a missing command), a ``command`` that names no program - none of that name on
        the server's ``PATH`` (its ``env:`` may set one), or, for a path (``./run.sh``), no executable file
        there, taken from ``cwd`` as the OS takes it - and a whole command line in ``command`` (``"node
        x.js stdio"``), which is looked up as one program name.

        The environment's loader calls it (:meth:`~swift_rlfactory.env.config.EnvConfig.mcp_servers`), so a
        typo fails before any model is loaded, and so does each start, for a file that went away since.
        """
        if self.url is not None:
            scheme = urlsplit(self.url).scheme
            if scheme.lower() not in ("http", "https"):  # the url itself is not shown: it may hold a key
                given = f"it starts with {scheme}://" if "://" in self.url else "it has none"
                raise ValueError(f"url must start with http:// or https:// ({given})")
        for i, root in enumerate(self.roots or ()):
            if not Path(root).is_dir():
                what = "does not exist" if not Path(root).exists() else "is not a folder"
                raise ValueError(f"roots[{i}]: folder {root} {what}")
        if self.command is None:
            return
        if self.cwd is not None and not Path(self.cwd).is_dir():
            what = "does not exist" if not Path(self.cwd).exists() else "is not a folder"
            raise ValueError(f"cwd {self.cwd} {what}")
        command = self.command
        if command in PYTHON_COMMANDS or self._program(command):
            return
        try:
            program, *rest = shlex.split(command)
        except ValueError:
            program, rest = "", []
        if rest and (self._program(program) or program in PYTHON_COMMANDS):
            raise ValueError(
                f"command {command!r} is not a program: the whole string is looked up as one name. "
                f"Did you mean command: {program}, args: {json.dumps([*rest, *self.args])}?"
            )
        if "/" in command:
            where = f" (taken from cwd {self.cwd})" if self.cwd and not Path(command).is_absolute() else ""
            raise ValueError(f"command {command!r} is no executable file{where}")
        raise ValueError(f"command {command!r} names no program on PATH (install it, or give its full path)")

    def _program(self, command: str) -> bool:
        """Whether ``command`` starts a program, found as the OS finds it for this server: a path (it has
        a ``/``) from ``cwd``, a bare name on the ``PATH`` the server gets (its ``env:``, else ours)."""
        if "/" in command:
            path = Path(self.cwd or ".", command)
            return path.is_file() and os.access(path, os.X_OK)
        return shutil.which(command, path=self.env.get("PATH", os.environ.get("PATH"))) is not None

    def select_tools(self, offered: Sequence[str]) -> list[str]:
        """The names in ``offered`` that the model may see, in the server's order: those the allowlist
        names (all of them when there is none) that no denylist names.

        Raises ``ValueError`` naming the field when a filter names a tool the server does not offer: a
        misspelt ``excludeTools`` entry would otherwise hand the model the very tool it was meant to hide,
        and a misspelt ``includeTools`` entry would quietly take one away.
        """
        known = set(offered)
        for field, names in (
            ("/".join(ALLOW_KEYS), self.include_tools or []), ("/".join(DENY_KEYS), self.exclude_tools)
        ):  # fmt: skip
            if unknown := [name for name in names if name not in known]:
                raise ValueError(
                    f"{field} names {', '.join(map(repr, unknown))}, which the server does not offer; "
                    f"it offers: {', '.join(offered) or 'no tools'}"
                )
        return [name for name in offered if self.allows_tool(name)]

    def allows_tool(self, name: str) -> bool:
        """Whether the filters let the model call tool ``name``: one the allowlist names (any, when there is
        none) that no denylist names. A tool the server begins to offer during the run takes this test too."""
        return (self.include_tools is None or name in self.include_tools) and name not in self.exclude_tools

    def resolved(self, base_dir: Path) -> McpServerConfig:
        """A copy with ``${VAR}`` and ``${file:PATH}`` expanded in every string field (a relative ``PATH`` is
        taken from ``base_dir``), the values that are secrets recorded as such (every one in ``url`` and
        ``headers``, in an ``env:`` entry or after a ``--flag`` named like a credential, and elsewhere one
        named or shaped like a key: :func:`~swift_rlfactory.redaction.expand`), and a working directory that
        defaults to ``base_dir`` (the environment file's folder for an inline server, the config file's
        workspace folder for one from ``mcp_config``), ``~`` expanded.

        Raises ``ValueError`` naming the field for an unset variable without a default, an unreadable
        ``${file:...}``, and for VS Code's
        ``${input:...}`` (and ``${command:...}``, ``${config:...}``): the editor asks for those, and
        nobody can answer them in a training run.
        """
        predefined = {  # VS Code's and Cursor's own variables; paths, not secrets
            "workspaceFolder": str(base_dir),
            "workspaceFolderBasename": base_dir.name,
            "userHome": str(Path.home()),
            "pathSeparator": os.sep,
        }

        def expand(text: str, field: str, secret: bool = False) -> str:
            if asked := _EDITOR_VARIABLE.search(text):
                raise ValueError(
                    f"{field}: {asked[0]} is answered in the editor (VS Code asks for it), and nothing can "
                    "answer it in a training run: put the value in an environment variable and write "
                    "${env:NAME} (or ${NAME}) instead"
                )
            try:
                return redaction.expand(text.replace("${/}", os.sep), predefined, base_dir, secret=secret)
            except ValueError as exc:
                raise ValueError(f"{field}: {exc}") from None

        env = {k: expand(v, f"env.{k}", secret=redaction.looks_secret(k)) for k, v in self.env.items()}
        if self.env_file:
            path = Path(expand(self.env_file, "envFile"))
            env = {**_dotenv(path if path.is_absolute() else base_dir / path), **env}
        for name in self.env_vars:  # passed through by name; a value written in ``env`` wins (Goose)
            if name not in env:
                env[name] = expand(f"${{{name}}}", "env_keys/env_vars", secret=redaction.looks_secret(name))
        credential = [redaction.credential_arg(self.args, i) for i in range(len(self.args))]
        update: dict[str, Any] = {
            "args": [expand(a, f"args[{i}]", credential[i]) for i, a in enumerate(self.args)],
            "env": env,
            "headers": {
                k: _header_value(expand(v, f"headers.{k}", secret=True), f"headers.{k}")
                for k, v in self.headers.items()
            },
        }
        redaction.remember_env(update["env"])
        for value, is_credential in zip(update["args"], credential, strict=True):
            if is_credential:  # a literal key after --token is as secret as an expanded one
                redaction.remember(
                    value.partition("=")[2] if value.startswith("-") else value, "<secret arg>"
                )
        for name, value in update["headers"].items():
            if "$" not in self.headers[name]:  # a literal key; expanded ones are recorded as ${VAR}
                redaction.remember(value, f"<{name} header>")
                for part in value.split():
                    if part.lower() not in ("bearer", "basic", "token", "digest"):
                        redaction.remember(part, f"<{name} header>")
        named = {
            header: (f"env_http_headers.{header}", f"${{{var}}}")
            for header, var in self.env_http_headers.items()
        }
        if self.bearer_token_env_var is not None:
            named["Authorization"] = ("bearer_token_env_var", f"Bearer ${{{self.bearer_token_env_var}}}")
        for header, (field, written) in named.items():  # these win over a static header, whatever its case
            update["headers"] = {k: v for k, v in update["headers"].items() if k.lower() != header.lower()}
            update["headers"][header] = _header_value(expand(written, field, secret=True), field)
        if self.url is not None:
            update["url"] = expand(self.url, "url", secret=True).strip()  # pasted with a space or newline
            redaction.remember_url(update["url"])
        if self.command is not None:
            update["command"] = expand(self.command, "command")
            cwd = Path(expand(self.cwd, "cwd")).expanduser() if self.cwd else base_dir
            update["cwd"] = str(cwd if cwd.is_absolute() else (base_dir / cwd).resolve())
        if self.roots is not None:
            update["roots"] = [
                str(_root_folder(expand(root, f"roots[{i}]"), base_dir, f"roots[{i}]"))
                for i, root in enumerate(self.roots)
            ]
        return self.model_copy(update=update)


def _header_value(value: str, field: str) -> str:
    """An expanded header value as HTTP sends it: without surrounding whitespace, which is no part of a
    field value (RFC 9110, 5.5) - a token read with its newline is the token. A line break or other
    control character inside cannot be sent: ``ValueError`` naming the ``field`` it came from
    (``headers.X``, ``bearer_token_env_var``), never showing the value (httpx's own error at start would
    show it whole)."""
    value = value.strip()
    if any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in value):
        raise ValueError(
            f"{field}: the value holds a line break or another control character, which an HTTP "
            "header cannot carry (a variable or file read with a newline inside it?)"
        )
    return value


def _root_folder(root: str, base_dir: Path, field: str) -> Path:
    """A ``roots`` entry as an absolute folder path: a ``file://`` URI's path, or a path (``~`` expanded)
    taken from ``base_dir``; ``ValueError`` naming ``field`` for a URI of another scheme (``http://``)."""
    parts = urlsplit(root)
    if parts.scheme.lower() == "file":
        return Path(url2pathname(parts.path)).resolve()
    if "://" in root:
        raise ValueError(f"{field}: {root!r} is not a folder path or a file:// URI")
    path = Path(root).expanduser()
    return (path if path.is_absolute() else base_dir / path).resolve()


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
        path = (info.context or {}).get("path")
        gemini = _gemini_server_lists(data, info)
        servers: dict[str, Any] = {}
        goose_own: list[str] = []
        for key in SERVER_KEYS:
            block = data.get(key)
            if block is None or (key == "mcp" and gemini is not None and _is_gemini_mcp_block(block)):
                continue
            if key == "extensions":
                if not _is_goose_extensions(block):  # Gemini CLI's extension settings
                    logger.debug("MCP config: ignoring top-level key 'extensions'")
                    continue
                goose_own += [
                    n for n, e in block.items() if isinstance(e, dict) and e.get("type") in _GOOSE_OWN_TYPES
                ]
                block = {n: _goose_entry(n, e) for n, e in block.items() if n not in goose_own}
            if isinstance(block, list):  # Continue: [{"name": "sqlite", "command": ...}, ...]
                block = _named_list(key, block)
            if not isinstance(block, dict):
                raise ValueError(f"'{key}' must map server names to servers, got {type(block).__name__}")
            for name, server in block.items():
                if name in servers:
                    raise ValueError(f"server {name!r} is defined twice (again under '{key}')")
                if key == "mcp_servers" and isinstance(server, dict) and "url" in server:
                    server = {"transport": "streamable-http", **server}  # Codex's only HTTP transport
                servers[name] = server
        if enabled_own := [n for n in goose_own if _goose_enabled(data["extensions"][n])]:
            _warn_once(
                info,
                logging.WARNING,
                f"MCP config: skipping Goose's own extensions {', '.join(map(repr, enabled_own))} (types "
                f"{'/'.join(sorted(_GOOSE_OWN_TYPES))}): they run inside goose, not as MCP servers one can start",
            )
        for key, value in data.items():
            if key in SERVER_KEYS:
                continue
            if _is_server(value) or (isinstance(value, dict) and any(map(_is_server, value.values()))):
                raise ValueError(
                    f"top-level key {key!r} holds MCP servers, but servers are read only under one of "
                    f"{', '.join(SERVER_KEYS)}: write them as mcpServers: {{name: {{command: ...}}}}"
                )
            logger.debug("MCP config: ignoring top-level key %r", key)
        if gemini is not None:
            servers = _gemini_selected(servers, *gemini, info)
        file_unit = _file_timeout_unit(data, gemini is not None, path)
        return {
            "mcpServers": {name: _timeout_with_unit(name, s, file_unit, info) for name, s in servers.items()}
        }

    @field_validator("mcpServers")
    @classmethod
    def _enabled_only(cls, servers: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in [n for n, s in servers.items() if s.disabled]:
            logger.info("MCP server %r is disabled in its config; skipping it", name)
        return {name: server for name, server in servers.items() if not server.disabled}


# Gemini CLI's settings.json has a global ``mcp`` block beside ``mcpServers``: which servers to connect to.
# opencode's ``mcp`` maps names to servers instead; the shape tells them apart (no value here is a server).
_GEMINI_MCP_KEYS = frozenset({"allowed", "excluded", "serverCommand"})
_GEMINI_OLD_KEYS = {"allowMCPServers": "allowed", "excludeMCPServers": "excluded"}  # settings.json before v2


def _is_gemini_mcp_block(block: Any) -> bool:
    """Whether an ``mcp`` block is Gemini CLI's global settings rather than opencode's server map."""
    return (
        isinstance(block, dict)
        and bool(block)
        and set(block) <= _GEMINI_MCP_KEYS
        and not any(isinstance(v, dict) for v in block.values())
    )


def _gemini_server_lists(
    data: dict[str, Any], info: ValidationInfo
) -> tuple[list[str] | None, list[str]] | None:
    """Gemini CLI's ``mcp.allowed`` and ``mcp.excluded`` (or the older top-level ``allowMCPServers`` and
    ``excludeMCPServers``), or ``None`` when the file has neither. Each must be a list of server names."""
    block = data.get("mcp")
    if isinstance(block, dict) and not _is_gemini_mcp_block(block):
        if mixed := sorted(k for k in _GEMINI_MCP_KEYS & set(block) if not isinstance(block[k], dict)):
            raise ValueError(
                f"'mcp' mixes Gemini CLI's settings ({', '.join(mixed)}) with opencode's servers: a file "
                "is one client's; Gemini CLI's servers go under mcpServers"
            )
        block = None
    lists: dict[str, Any] = {}
    if block is not None:
        if "serverCommand" in block:
            _warn_once(
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


def _gemini_selected(
    servers: dict[str, Any], allowed: list[str] | None, excluded: list[str], info: ValidationInfo
) -> dict[str, Any]:
    """The servers Gemini CLI would connect to: those ``allowed`` names (all when it is not given) that
    ``excluded`` does not. A name the file does not define is logged (a warning for ``allowed``), not fatal:
    these lists live in a user's global settings and may name servers of other projects."""
    for field, names in (("mcp.allowed", allowed or []), ("mcp.excluded", excluded)):
        unknown = [n for n in names if n not in servers]
        if unknown:
            level = logging.WARNING if field == "mcp.allowed" else logging.INFO  # excluding more is harmless
            _warn_once(info, level, f"MCP config: {field} names servers this file does not define: {unknown}")
    kept = {}
    for name, server in servers.items():
        if (allowed is not None and name not in allowed) or name in excluded:
            logger.info(
                "MCP server %r is left out by Gemini CLI's mcp.allowed/mcp.excluded; skipping it", name
            )
        else:
            kept[name] = server
    return kept


def _file_timeout_unit(data: dict[str, Any], gemini: bool, path: Path | None) -> Literal["s", "ms"] | None:
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


def _timeout_with_unit(
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
        read = f"{value:g} s" if value <= _TIMEOUT_SECONDS_MAX else f"{value / 1000:g} s (milliseconds)"
        _warn_once(
            info,
            logging.WARNING,
            f"MCP server {name!r}: the bare 'timeout: {value:g}' is read as {read}: clients differ (Cline and "
            "Roo write seconds, Gemini CLI and opencode milliseconds), and this file does not say which; "
            "write timeout_s or timeout_ms to say the unit",
        )
    return entry


def _is_goose_extensions(block: Any) -> bool:
    """Whether a top-level ``extensions`` block is Goose's (entries that say how to start a server: a
    ``type``, a ``cmd`` or a ``uri``) rather than Gemini CLI's settings (``{"disabled": [...]}``)."""
    return isinstance(block, dict) and any(
        isinstance(entry, dict) and {"type", "cmd", "uri"} & entry.keys() for entry in block.values()
    )


_SWITCH = TypeAdapter(bool)  # how a server's ``enabled`` / ``disabled`` field reads a value


def _goose_enabled(entry: dict[str, Any]) -> bool:
    """Whether a Goose extension is switched on, its ``enabled`` read as a server's ``enabled`` field reads
    it (``false``, ``"no"``, ``0``, ... are off); a value that field would refuse counts as on."""
    try:
        return _SWITCH.validate_python(entry.get("enabled", True))
    except ValidationError:
        return True


def _goose_entry(name: str, entry: Any) -> Any:
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


# Folders a client keeps its project config in; the workspace is the folder above (VS Code's
# ``${workspaceFolder}`` of ``.vscode/mcp.json``). Continue and Kiro nest one level deeper.
_CLIENT_FOLDERS = frozenset(
    {".vscode", ".cursor", ".gemini", ".roo", ".kilocode", ".windsurf", ".codeium", ".zed", ".continue",
     ".kiro", ".amazonq", ".claude", ".opencode", ".codex"}
)  # fmt: skip
_CLIENT_SUBFOLDERS = frozenset({"mcpServers", "settings"})


def workspace_folder(path: Path) -> Path:
    """The folder a config file's ``${workspaceFolder}``, relative paths and default ``cwd`` start from: the
    file's own folder, or the project folder above it for a file a client keeps in its own folder
    (``proj/.vscode/mcp.json``, ``proj/.cursor/mcp.json``, ``proj/.continue/mcpServers/x.yaml`` -> ``proj``)."""
    folder = path.parent
    if folder.name in _CLIENT_SUBFOLDERS and folder.parent.name in _CLIENT_FOLDERS:
        folder = folder.parent
    return folder.parent if folder.name in _CLIENT_FOLDERS else folder


def read_config_file(path: Path) -> Any:
    """The data of an MCP config file: YAML or TOML (Codex's ``config.toml``) by extension, otherwise JSON
    with comments and trailing commas allowed (VS Code's and Zed's files are JSONC). A UTF-8 byte order
    mark (Windows editors write one) is skipped. Raises ``ValueError`` saying what is wrong."""
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:  # says where, never what: a value may be a key
            raise ValueError(f"not valid TOML: {exc}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"not valid YAML: {yaml_errors.describe(exc)}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(_JSONC.sub(lambda m: m.group(1) or "", text))
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None


# What VS Code asks the user for (a prompt, a command's answer, a setting): nothing to answer it offline.
_EDITOR_VARIABLE = re.compile(r"\$\{(?:input|command|config):[^}]*\}")

# A string (kept), or a comment or a trailing comma (dropped); strings first, so "http://x" survives.
_JSONC = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/|,(?=\s*[}\]])', re.DOTALL)


def _dotenv(path: Path) -> dict[str, str]:
    """``KEY=value`` lines of a VS Code ``envFile`` (``#`` comments, optional quotes and ``export``)."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except OSError as exc:
        raise ValueError(f"envFile {path}: {exc.strerror or exc}") from None
    env = {}
    for line in lines:
        line = line.strip().removeprefix("export ").strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip().strip("'\"")
    return env


def _transport(spelling: Any) -> Transport | None:
    if spelling is None:
        return None
    key = re.sub(r"[-_\s]", "", str(spelling)).lower()
    if key not in _TRANSPORTS:
        raise ValueError(
            f"type/transport {spelling!r} is not one of stdio, sse, http, streamable-http (any spelling)"
        )
    return _TRANSPORTS[key]


def _scalar_text(value: Any) -> Any:
    """YAML and JSON numbers and booleans where a string is meant (``PORT: 8000``) become strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and not (isinstance(value, float) and not math.isfinite(value)):
        return str(value)
    return value


_ABSENT = object()  # a key the entry does not give (``None`` is YAML's empty value, and an error)


def _joined(where: str, given: Any, own: Any) -> Any:
    """``args`` or ``env`` from a nested or list ``command`` (``given``) joined before the entry's ``own``
    value of that key. ``given`` of the wrong type fails naming ``where``; an ``own`` of the wrong type is
    left for the field's validation to name."""
    kind = dict if where.endswith("env") else list
    if not isinstance(given, kind):
        what = "a mapping of names to values" if kind is dict else "a list of strings"
        raise ValueError(
            f"'{where}' must be {what}, got {'nothing' if given is None else type(given).__name__}"
        )
    if own is _ABSENT:
        return given
    if isinstance(own, dict) and kind is dict:
        return {**given, **own}
    if isinstance(own, list) and kind is list:
        return [*given, *own]
    return own


def _joined_lists(given: list[tuple[str, Any]]) -> list[str]:
    """The tool names of every denylist given (``excludeTools`` and ``disabledTools`` may both be there),
    in order; one that is not a list of strings fails naming its key."""
    names: list[str] = []
    for key, value in given:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"'{key}' must be a list of tool names")
        names += [v for v in value if v not in names]
    return names


def _named_list(key: str, entries: list[Any]) -> dict[str, Any]:
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
