"""One server entry (:class:`McpServerConfig`): its fields in our spelling, whether it can start as
written, which of its tools the model may see, and its values with variables expanded."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..oauth.settings import OAuthSettings
from . import variables
from .spellings import ALLOW_KEYS, DENY_KEYS, Transport, client_spellings
from .timeouts import TIMEOUT_SECONDS_MAX

# What names an environment variable: Codex's ``bearer_token_env_var`` and ``env_http_headers``, Goose's
# ``env_keys`` and Codex's ``env_vars`` hold names, never values.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Besides the MCP SDK's safe set, a stdio server sees these: they make ``python`` mean this Python and
# keep it offline and in our cache, give it the GPUs we were given, and let it through the proxy and
# certificates this machine needs. Only a proxy URL may hold a credential; the stdio transport records it.
PASSTHROUGH_ENV = (
    "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ",
    "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "RLFACTORY_CACHE", "CUDA_VISIBLE_DEVICES",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
)  # fmt: skip

DEFAULT_POOL = 8  # processes of a stdio server of scope trajectory, when ``pool`` is not given
DEFAULT_LEASE_TIMEOUT_S = 60.0  # a trajectory's wait for a free process of a full pool
DEFAULT_READY_SESSIONS = 8  # sessions a remote server of scope trajectory keeps open ahead: a GRPO group

PYTHON_COMMANDS = ("python", "python3")


def _unset(value: Any) -> bool:
    return value is None  # started as this interpreter, sys.executable (the stdio transport)


class McpServerConfig(BaseModel):
    """One server entry; docs/mcp.md lists every accepted key and each client's spelling of it."""

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
    # OAuth (docs/mcp.md, "OAuth"); left out of a dump while unset, so the tool cache's namespace stays.
    auth: OAuthSettings | None = Field(default=None, exclude_if=lambda v: v is None)
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
    roots: list[str] | None = (
        None  # None: folders in args, else the env's folder (the provider's roots); []: none
    )
    # Per-trajectory servers (docs/mcp.md, "Per-trajectory servers"): one session (HTTP) or one leased
    # process of at most ``pool`` (stdio) per live trajectory, reset by ``reset_tool`` or a restart; a remote
    # one keeps ``ready_sessions`` sessions open ahead, used by nobody, for the trajectories that start next.
    # Left out of a dump while unset, so that the tool cache's namespace of an existing entry stays as it was.
    scope: Literal["shared", "trajectory"] = Field(default="shared", exclude_if=lambda v: v == "shared")
    pool: int | None = Field(default=None, ge=1, le=1024, exclude_if=_unset)
    reset_tool: str | None = Field(default=None, min_length=1, exclude_if=_unset)
    lease_timeout_s: float | None = Field(default=None, gt=0, allow_inf_nan=False, exclude_if=_unset)
    ready_sessions: int | None = Field(default=None, ge=1, le=256, exclude_if=_unset)

    @model_validator(mode="before")
    @classmethod
    def _client_spellings(cls, data: Any, info: ValidationInfo) -> Any:
        """Map every client's spelling onto ours; drop UI-only keys."""
        if not isinstance(data, dict):
            return data
        return client_spellings(data, info, cls.model_fields)

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
        if self.command is not None and self.auth is not None:
            raise ValueError("'auth' (OAuth) is for a remote server ('url'), not a stdio 'command'")
        self._check_scope()
        return self

    def _check_scope(self) -> None:
        """``pool``, ``reset_tool`` and ``lease_timeout_s`` belong to a stdio server of scope trajectory,
        ``ready_sessions`` to a remote one, and ``sessions`` to a shared one (a per-trajectory server has one
        session per trajectory)."""
        given = self.model_fields_set
        if self.scope == "shared":
            fields = ("pool", "reset_tool", "lease_timeout_s", "ready_sessions")
            if extra := [k for k in fields if k in given]:
                raise ValueError(f"'{extra[0]}' needs 'scope: trajectory' (this server is shared)")
            return
        if "sessions" in given:
            raise ValueError(
                "'sessions' is for a shared server; with 'scope: trajectory' each trajectory has its own "
                "session (a stdio server's processes: 'pool')"
            )
        if self.command is None and (extra := [k for k in ("pool", "reset_tool") if k in given]):
            raise ValueError(
                f"'{extra[0]}' is for a stdio server; a remote server of scope trajectory opens one "
                "session per trajectory"
            )
        if self.command is not None and "ready_sessions" in given:
            raise ValueError(
                "'ready_sessions' is for a remote server; a stdio server of scope trajectory leases the "
                "processes of its 'pool'"
            )

    @property
    def pool_size(self) -> int:
        """Processes a stdio server of scope trajectory may run at once (``pool``, default 8)."""
        return self.pool if self.pool is not None else DEFAULT_POOL

    @property
    def ready_size(self) -> int:
        """Sessions a remote server of scope trajectory keeps open ahead (``ready_sessions``, default 8)."""
        return self.ready_sessions if self.ready_sessions is not None else DEFAULT_READY_SESSIONS

    @property
    def lease_wait_s(self) -> float:
        """How long a trajectory waits for a free process of a full pool (``lease_timeout_s``, default 60)."""
        return self.lease_timeout_s if self.lease_timeout_s is not None else DEFAULT_LEASE_TIMEOUT_S

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
            return self.timeout if self.timeout <= TIMEOUT_SECONDS_MAX else self.timeout / 1000
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
        return variables.resolved(self, base_dir)
