"""The environment file: one YAML document (tools, limits, cache, reward, credit, episode, user) validated at
load time.

Every field and default is declared below; the file format, path rules and checks are in
docs/environments.md.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from swift_rlfactory import redaction
from swift_rlfactory.data import yaml_errors
from swift_rlfactory.redaction import redact

from ..rewards.terms import RewardTerm
from ..tools.builtin import BuiltinEntry, parse_builtin
from ..tools.executor import Limits
from ..tools.limit_scope import LimitScope, rank_share
from ..tools.mcp.config import McpConfig, McpServerConfig, read_config_file, workspace_folder
from ..tools.observation import encodable


class EnvConfigError(ValueError):
    """The environment file is missing, unreadable or invalid; the message names the field."""


class _Strict(BaseModel):
    # allow_inf_nan=False: a non-finite timeout never fires and a non-finite weight poisons every total.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """``max_turns: true`` is a mistake, not 1 (pydantic's lax mode reads it so); ``4.0`` stays 4."""
        annotation = cls.model_fields[info.field_name].annotation if info.field_name else None
        if isinstance(value, bool) and annotation in (int, float, int | None, float | None):
            raise ValueError(f"expected a number, got {str(value).lower()}")
        return value


class ToolsConfig(_Strict):
    """Where the tools come from."""

    python: list[str] = Field(default_factory=list, description="'file.py', 'file.py:fn', 'module:fn'")
    mcp: McpConfig | None = Field(default=None, description="inline {'mcpServers': {...}}")
    mcp_config: str | None = Field(
        default=None, description="path to an MCP client's config file (JSON, YAML or TOML) of servers"
    )
    builtin: list[BuiltinEntry] = Field(
        default_factory=list, description="built-in tools: 'run_python' or {'run_python': {settings}}"
    )

    @field_validator("builtin")
    @classmethod
    def _known_builtins(cls, value: list[BuiltinEntry]) -> list[BuiltinEntry]:
        names = [parse_builtin(entry)[0] for entry in value]
        if len(set(names)) < len(names):
            raise ValueError(f"a built-in tool is listed twice: {names}")
        return value


class LimitsConfig(_Strict):
    """Turn, time, concurrency and size limits."""

    max_turns: int = Field(default=4, gt=0, description="assistant turns per trajectory, tool turns included")
    call_timeout_s: float = Field(default=30.0, gt=0, description="seconds one tool call may take")
    max_concurrency: int = Field(default=256, gt=0, description="tool calls in flight at once, all tools")
    per_tool_concurrency: dict[str, int] = Field(
        default_factory=dict, description="tool name -> calls in flight"
    )
    concurrency_scope: LimitScope = Field(
        default="rank",
        description="who shares max_concurrency and per_tool_concurrency: each rank (process) alone, the "
        "ranks of one node (divided by LOCAL_WORLD_SIZE) or the whole run (divided by WORLD_SIZE); at "
        "least 1 per rank",
    )
    max_output_tokens: int | None = Field(default=1024, gt=0, description="observation length cap (tokens)")
    max_calls_per_turn: int = Field(
        default=8,
        gt=0,
        description="tool calls run in one turn; as many more become error observations saying so, and the "
        "rest are dropped (counted in the last one's error): a turn adds at most twice this many tool messages",
    )
    retries: int = Field(default=2, ge=0, description="retries of a call whose server was unreachable")
    max_images_per_trajectory: int = Field(
        default=4,
        ge=0,
        description="images from tools a vision-language model is shown per trajectory; later ones, and every "
        "image for a text-only model, read as a note of their type and size",
    )
    max_image_bytes: int = Field(
        default=2_000_000, gt=0, description="largest image from a tool (encoded bytes) shown as an image"
    )
    max_description_chars: int | None = Field(
        default=4096,
        gt=0,
        description="longest tool or parameter description in the system prompt; longer ones are cut with "
        "a note and a start-up warning names the tool (an MCP server may send a whole manual); null: no cap",
    )

    @field_validator("per_tool_concurrency")
    @classmethod
    def _positive(cls, value: dict[str, int]) -> dict[str, int]:
        for name, limit in value.items():
            if limit <= 0:
                raise ValueError(f"limit for {name!r} must be positive, got {limit}")
        return value

    def executor_limits(self) -> Limits:
        """The subset the executor needs, the concurrency limits as this rank's share of them."""
        scope = self.concurrency_scope
        return Limits(
            call_timeout_s=self.call_timeout_s,
            max_concurrency=rank_share(self.max_concurrency, scope),
            per_tool_concurrency={
                name: rank_share(n, scope) for name, n in self.per_tool_concurrency.items()
            },
            max_output_tokens=self.max_output_tokens,
            retries=self.retries,
            max_description_chars=self.max_description_chars,
        )


class CacheConfig(_Strict):
    """Which tools are cached and how much is kept."""

    tools: list[str] = Field(default_factory=list, description="tool names to cache; ['*'] for all")
    max_entries: int = Field(default=10_000, gt=0)
    max_bytes: int = Field(default=256 * 1024 * 1024, gt=0)
    ttl_s: float | None = Field(default=None, gt=0, description="seconds an entry lives; none = forever")
    sqlite_path: str | None = Field(
        default=None, description="persistent store shared by the processes of one machine (a local disk)"
    )
    redis_url: str | None = Field(
        default=None,
        description="a Redis or Valkey server as the store instead, shared by processes on any machine: "
        "redis://[:password@]host:port/db, rediss:// or unix://; ${VAR} expanded, held as a secret",
    )

    @field_validator("redis_url", mode="before")
    @classmethod
    def _expand_url(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        source = (info.context or {}).get("source")
        url = redaction.expand(value, base_dir=source.parent if source else Path("."), secret=True).strip()
        redaction.remember_url(url, "<cache.redis_url credential>")
        if url.partition("://")[0] not in ("redis", "rediss", "unix"):
            raise ValueError("not a Redis URL: it must start with redis://, rediss:// or unix://")
        return url

    @model_validator(mode="after")
    def _one_store(self) -> CacheConfig:
        if self.sqlite_path and self.redis_url:
            raise ValueError("give either sqlite_path or redis_url, not both")
        return self


class CreditConfig(_Strict):
    """How rewards become advantages: one per trajectory (ms-swift's GRPO) or one per assistant turn.

    ``mode: turn`` adds ``turn_weight`` x the group-normalised discounted return of the per-turn rewards to
    ms-swift's outcome advantage (docs/rewards.md#per-turn-credit).
    """

    mode: Literal["trajectory", "turn"] = Field(
        default="trajectory", description="trajectory: ms-swift's GRPO as is; turn: per-turn advantages"
    )
    gamma: float = Field(default=0.95, ge=0, le=1, description="discount of later turns' rewards")
    turn_weight: float = Field(default=1.0, ge=0, description="weight of the turn advantage")


class EpisodeConfig(_Strict):
    """Per-trajectory state: made from the dataset row when a trajectory starts, torn down after its rewards
    (docs/environments.md#episode-state)."""

    setup: str = Field(description="'file.py:function' or 'module:Class' (a class with setup and teardown)")
    teardown: str | None = Field(default=None, description="'file.py:function' given the state; optional")
    setup_timeout_s: float = Field(default=60.0, gt=0, description="longest a setup may take")
    teardown_timeout_s: float = Field(default=30.0, gt=0, description="longest a teardown is waited for")
    reward_wait_s: float = Field(
        default=600.0, gt=0, description="how long a finished trajectory's state waits for its rewards"
    )


class UserConfig(_Strict):
    """A simulated user who speaks when the agent replies without a tool call and without a final answer:
    Python code (``scripted``) or a model behind an OpenAI-compatible endpoint
    (docs/environments.md#simulated-users)."""

    scripted: str | None = Field(
        default=None,
        description="'file.py:name' or 'module:name': a function reply(goal, messages) -> str, or a class "
        "instantiated once with such a reply method; sync or async",
    )
    model: str | None = Field(default=None, description="the model name the endpoint serves; ${VAR} expanded")
    base_url: str | None = Field(
        default=None, description="the API root, up to /v1; ${VAR} expanded, held as a secret"
    )
    api_key: SecretStr | None = Field(
        default=None, description="bearer token, normally ${VAR}; held as a secret, never logged"
    )
    persona: str = Field(default="", description="instructions for the model user (its system prompt)")
    goal_field: str = Field(
        default="user_goal", description="the dataset row's field holding the hidden goal"
    )
    stop_marker: str = Field(default="###STOP###", min_length=1, description="the user says it is done")
    answer_pattern: str = Field(
        default="<answer>",
        min_length=1,
        description="a regular expression; an agent turn whose visible reply matches it is a final answer",
    )
    timeout_s: float = Field(
        default=30.0, gt=0, description="longest one user reply may take, retries included"
    )
    max_user_turns: int = Field(default=8, gt=0, description="user replies per trajectory")
    cache: bool = Field(default=True, description="same goal and conversation so far: same reply, asked once")
    temperature: float = Field(default=0.0, ge=0, description="the model user's sampling temperature")
    max_tokens: int = Field(default=256, gt=0, description="longest model user reply, in tokens")
    echo_retries: int = Field(
        default=0,
        ge=0,
        le=3,
        description="a model user's reply that only repeats the agent's message is asked again this many "
        "times, with a reminder of its role added to its system prompt",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="merged into every model user request, e.g. chat_template_kwargs"
    )

    @field_validator("model", "base_url", mode="before")
    @classmethod
    def _expand(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        source = (info.context or {}).get("source")
        url = info.field_name == "base_url"  # a URL may carry a key anywhere; a model name is no secret
        base_dir = source.parent if source else Path(".")
        text = redaction.expand(value, base_dir=base_dir, secret=url).strip()
        if url:
            redaction.remember_url(text, "<user base_url credential>")
        return text

    @field_validator("api_key", mode="before")
    @classmethod
    def _expand_key(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        source = (info.context or {}).get("source")
        key = redaction.expand(value, base_dir=source.parent if source else Path("."), secret=True).strip()
        redaction.remember(key, "<user api_key>")  # a literal key too (an expanded one is ${VAR})
        return key or None

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/") if value else value

    @field_validator("stop_marker")
    @classmethod
    def _plain(cls, value: str) -> str:
        if encodable(value) != value:  # the user's replies are defused so: this marker could never be said
            raise ValueError(
                f"{value!r} holds a chat template's control token, a media tag or a control character, which "
                "a user's reply never carries as such; choose plain text such as ###STOP###"
            )
        return value

    @field_validator("answer_pattern")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_user(self) -> UserConfig:
        if (self.scripted is None) == (self.model is None):
            raise ValueError("give either scripted (Python code) or model (an endpoint), not both or neither")
        if self.model is not None and self.base_url is None:
            raise ValueError("a model user needs base_url (http://HOST:PORT/v1)")
        if self.scripted is not None and (self.base_url or self.api_key):
            raise ValueError("base_url and api_key belong to a model user, not a scripted one")
        return self


class EnvConfig(_Strict):
    """A whole environment file. ``base_dir`` is the folder relative paths resolve against."""

    name: str = "env"
    system_prompt: str | None = None
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    reward: list[RewardTerm] = Field(default_factory=list)
    credit: CreditConfig = Field(default_factory=CreditConfig)
    episode: EpisodeConfig | None = None
    user: UserConfig | None = None
    base_dir: Path = Field(default=Path("."), exclude=True)
    source: Path | None = Field(default=None, exclude=True, description="the YAML file, for messages")
    _mcp: tuple[dict[str, McpServerConfig], McpConfig] | None = PrivateAttr(default=None)  # read once

    def resolve(self, path: str) -> Path:
        """``path`` made absolute against the environment's folder."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    def mcp_servers(self) -> McpConfig:
        """Inline servers merged with those of ``mcp_config``, resolved and checked startable; read once.

        Rules (which folder paths start from, a name given twice): docs/environments.md#paths.
        """
        return self._mcp_servers()[1]

    def mcp_servers_written(self) -> dict[str, McpServerConfig]:
        """The same servers as their files write them, before ``${VAR}`` expansion and path resolution:
        what the servers are, without the values of secrets (the cache digest names them by this)."""
        return self._mcp_servers()[0]

    def _mcp_servers(self) -> tuple[dict[str, McpServerConfig], McpConfig]:
        if self._mcp is None:
            self._mcp = self._read_mcp_servers()
        return self._mcp

    def _read_mcp_servers(self) -> tuple[dict[str, McpServerConfig], McpConfig]:
        servers = dict(self.tools.mcp.mcpServers) if self.tools.mcp else {}
        folders = dict.fromkeys(servers, self.base_dir)  # where each server's relative paths start
        if self.tools.mcp_config:
            path = self.resolve(self.tools.mcp_config)
            try:
                extra = McpConfig.model_validate(read_config_file(path), context={"path": path})
            except FileNotFoundError:
                raise EnvConfigError(f"tools.mcp_config: file not found: {path}") from None
            except OSError as exc:  # a folder, no permission
                raise EnvConfigError(f"tools.mcp_config: cannot read {path}: {exc.strerror or exc}") from None
            except ValidationError as exc:  # _describe names fields, never echoes values (they may be keys)
                raise EnvConfigError(f"tools.mcp_config ({path}):\n{_describe(exc)}") from None
            except ValueError as exc:
                raise EnvConfigError(f"tools.mcp_config ({path}): {exc}") from None
            for name, server in extra.mcpServers.items():
                if name in servers:
                    raise EnvConfigError(f"tools.mcp_config: server {name!r} is also defined inline")
                servers[name] = server
                folders[name] = workspace_folder(path)
        resolved = {}
        for name, server in servers.items():
            try:
                resolved[name] = server.resolved(folders[name])
                resolved[name].check_startable()
            except ValueError as exc:
                raise EnvConfigError(redact(f"tools: MCP server {name!r}: {exc}")) from None
        return servers, McpConfig(mcpServers=resolved)

    def check_tool_names(self, known: Collection[str]) -> None:
        """Fail, naming the field and the tools that exist, if a limit or the cache names another tool."""
        fields = {
            "cache.tools": [name for name in self.cache.tools if name != "*"],
            "limits.per_tool_concurrency": list(self.limits.per_tool_concurrency),
        }
        problems = [
            f"  {where}: unknown tool {name!r}"
            for where, names in fields.items()
            for name in names
            if name not in known
        ]
        if problems:
            tools = ", ".join(sorted(known)) or "none"
            where = self.source or self.base_dir
            raise EnvConfigError(f"{where}:\n" + "\n".join(problems) + f"\n  known tools: {tools}")


def load_env_config(path: str | Path) -> EnvConfig:
    """Read and validate an environment YAML file; raises :class:`EnvConfigError` naming the bad field."""
    path = Path(path).expanduser().resolve()
    if path.is_dir():
        hint = f"; did you mean {path / 'env.yaml'}?" if (path / "env.yaml").is_file() else ""
        raise EnvConfigError(f"environment file is a folder, not a YAML file: {path}{hint}")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 (safe)
    except FileNotFoundError:
        raise EnvConfigError(f"environment file not found: {path}") from None
    except UnicodeDecodeError:
        raise EnvConfigError(f"{path}: not a text file (not valid UTF-8)") from None
    except OSError as exc:
        raise EnvConfigError(f"{path}: cannot read the environment file: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise EnvConfigError(f"{path}: not valid YAML: {yaml_errors.describe(exc)}") from None
    if data is None or data == {}:
        raise EnvConfigError(f"{path}: the environment file is empty")
    if not isinstance(data, dict):
        raise EnvConfigError(f"{path}: the top level must be a mapping, got {type(data).__name__}")
    if written := sorted(_LOADER_FIELDS & data.keys()):
        raise EnvConfigError(
            f"{path}: {written[0]}: set by the loader (the file's own folder and path), not in the file"
        )
    try:
        # The context names the file in warnings about its inline MCP servers (told once per file).
        config = EnvConfig.model_validate(
            {**data, "base_dir": path.parent, "source": path}, context={"source": path}
        )
    except ValidationError as exc:
        raise EnvConfigError(f"{path}:\n{_describe(exc)}") from None
    servers = config.mcp_servers()  # reads and checks mcp_config now, not when the servers start
    if not (config.tools.python or config.tools.builtin or servers.mcpServers or config.reward):
        raise EnvConfigError(f"{path}: declares no tools and no reward, so a run would learn nothing")
    return config


_LOADER_FIELDS = frozenset({"base_dir", "source"})


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error naming its line (PyYAML
    keeps the last one, so ``name: a`` then ``name: b`` would silently drop the first)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _describe(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "(top level)"
        lines.append(f"  {where}: {err['msg']}")
    return "\n".join(lines)
