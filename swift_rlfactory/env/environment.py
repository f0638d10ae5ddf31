"""An :class:`Environment` is a loaded environment file, ready to run: tools, executor, reward spec.

What is checked at load and at start, and the tool cache's namespace: docs/environments.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..rewards.registry import RewardSpec
from ..runtime import blocking
from ..tools.builtin import builtin_providers
from ..tools.cache import ToolCache
from ..tools.calls import ToolCall
from ..tools.episode_state import NO_EPISODE
from ..tools.executor import ToolExecutor, ToolRecord
from ..tools.mcp import mcp_providers
from ..tools.python_tool import load_python_tools
from ..tools.toolset import PythonProvider
from .config import EnvConfig, EnvConfigError, load_env_config
from .episode import Episodes
from .prompt_size import PromptSize, prompt_size
from .user import SimulatedUser


class Environment:
    """Tools + limits + reward of one environment file.

    Args:
        config: the validated environment file.
        count_tokens: tokenizer-backed counter for exact observation truncation.
    """

    def __init__(self, config: EnvConfig, count_tokens: Callable[[str], int] | None = None):
        self.config = config
        self._checked = False
        python_tools: list[Any] = []
        for i, ref in enumerate(config.tools.python):
            try:
                loaded = load_python_tools(ref, config.base_dir)
            except Exception as exc:
                raise EnvConfigError(f"tools.python[{i}] ({ref!r}): {type(exc).__name__}: {exc}") from exc
            for found in loaded:  # the same tool listed twice (a file and one of its tools) counts once
                if any(found is known for known in python_tools):
                    continue
                if any(found.spec.name == known.spec.name for known in python_tools):
                    raise EnvConfigError(
                        f"tools.python[{i}] ({ref!r}): a second Python tool named {found.spec.name!r}"
                    )
                python_tools.append(found)
        stateful = [t.spec.name for t in python_tools if t.state_params]
        if stateful and config.episode is None:
            raise EnvConfigError(
                f"tool {stateful[0]!r} takes the episode state, and the environment declares no episode: "
                "add episode: {setup: file.py:function}"
            )
        providers: list[Any] = [PythonProvider(python_tools)] if python_tools else []
        providers.extend(mcp_providers(config.mcp_servers(), workspace=config.base_dir))
        providers.extend(builtin_providers(config.tools.builtin))
        cache_cfg = config.cache
        cache = None
        if cache_cfg.tools:
            try:
                cache = ToolCache(
                    max_entries=cache_cfg.max_entries,
                    max_bytes=cache_cfg.max_bytes,
                    ttl_s=cache_cfg.ttl_s,
                    sqlite_path=config.resolve(cache_cfg.sqlite_path) if cache_cfg.sqlite_path else None,
                    redis_url=cache_cfg.redis_url,
                )
            except ValueError as exc:  # a store that can never hold the cache: say so before any model loads
                field = "cache.redis_url" if cache_cfg.redis_url else "cache.sqlite_path"
                raise EnvConfigError(f"{field}: {exc}") from None
        cached_tools = None if "*" in cache_cfg.tools else set(cache_cfg.tools)
        self._start_lock = threading.Lock()
        try:
            self.reward = RewardSpec(config.reward, config.base_dir, cache=cache)  # judges cache there too
        except ValueError as exc:
            raise EnvConfigError(str(exc)) from None
        # Backends kept per trajectory (MCP servers of scope trajectory, persistent run_python): begun and
        # ended with each trajectory's episode
        per_trajectory = [p for p in providers if getattr(p, "per_trajectory", False)]
        episodes = Episodes(config.episode, config.base_dir, per_trajectory)
        user = SimulatedUser(config.user, config.base_dir, cache) if config.user is not None else None
        # Last, so that nothing above can fail after the executor's loop thread exists.
        self.executor = ToolExecutor(
            providers,
            config.limits.executor_limits(),
            cache,
            cached_tools,
            count_tokens=count_tokens,
            cache_namespace=_tools_digest(config),
        )
        episodes.run_on(self.executor.arun)  # async setups make their state on the tools' loop
        self.episodes = episodes
        if user is not None:
            user.run_on(self.executor.arun)  # its connections and cache outlive ms-swift's per-batch loops
        self.user = user

    @classmethod
    def load(cls, path: str | Path, count_tokens: Callable[[str], int] | None = None) -> Environment:
        """Load and validate an environment file (tools are not started yet)."""
        return cls(load_env_config(path), count_tokens=count_tokens)

    @property
    def name(self) -> str:
        """The environment's name."""
        return self.config.name

    @property
    def system_prompt(self) -> str | None:
        """The system prompt injected into every conversation, if any."""
        return self.config.system_prompt

    @property
    def max_turns(self) -> int:
        """Assistant turns allowed per trajectory."""
        return self.config.limits.max_turns

    def start(self) -> Environment:
        """Start the tool providers (spawn MCP servers, connect to remote ones), then check that every tool
        the config names exists; on failure the providers are closed again. Idempotent, thread-safe."""
        with self._start_lock:
            self.executor.start()
            if not self._checked:
                try:
                    self.config.check_tool_names(self.executor.tools)
                except EnvConfigError:
                    self.close()
                    raise
                self._checked = True
        return self

    async def call_tool(
        self, name: str, arguments: dict[str, Any], state: Any = NO_EPISODE, episode: str | None = None
    ) -> ToolRecord:
        """Run one tool call by name from inside any event loop (what ``Trajectory.call_tool`` reaches),
        with the episode ``state`` if the tool asks for it, on trajectory ``episode``'s own sessions of
        per-trajectory servers; the first call in a process starts the tools, once.
        """
        await asyncio.to_thread(self.start)
        calls = [ToolCall(name=name, arguments=arguments)]
        return (await self.executor.aexecute(calls, state, episode))[0]

    def try_tool(self, name: str, arguments: dict[str, Any]) -> ToolRecord:
        """One call from outside any trajectory (``tools call``, the UI's "Try a tool"); with ``episode:``
        or a per-trajectory server it runs in a scratch episode, set up from an empty row and torn down
        right after the call. Raises :class:`~.episode.EpisodeSetupError` when that setup fails."""
        if not self.episodes.enabled:
            return self.executor.execute([ToolCall(name=name, arguments=arguments)])[0]

        async def scratch() -> ToolRecord:
            key = f"try-{uuid.uuid4().hex}"
            async with self.episodes.scope(key, {}) as state:
                return await self.call_tool(name, arguments, state, key)

        return blocking.run(scratch())

    def close(self) -> None:
        """Tear down episode states still live (trajectories that never ended), close the simulated user,
        stop tool providers, close the cache and release the rewards' clients."""
        if self.episodes.live:
            blocking.run(self.episodes.close_all())
        if self.user is not None:
            self.user.close()
        self.executor.close()
        self.reward.close()

    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI function schemas of all tools (starts the providers if needed)."""
        self.start()
        return self.executor.schemas()

    def prompt_size(self) -> PromptSize:
        """Tokens of the system prompt and tool schemas every trajectory starts with (exact with the
        tokenizer the environment was loaded with, else estimated); starts the providers if needed."""
        return prompt_size(self.system_prompt, self.tool_schemas(), self.executor.count_tokens)

    def __enter__(self) -> Environment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def validate_env_files(paths: Iterable[str | Path], start: bool = False) -> list[str]:
    """Every problem of every environment file in ``paths``, one message per bad file (empty if all load).

    ``start`` also starts each file's tools (its MCP servers: slower) to check the tool names it uses.
    """
    errors = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        if path in seen:
            continue
        seen.add(path)
        try:
            env = Environment.load(path)
            try:
                if start:
                    env.start()
            finally:
                env.close()  # also stops the executor's loop thread, started or not
        except Exception as exc:  # a tool module may raise anything at import; report it, do not stop
            message = str(exc) if isinstance(exc, EnvConfigError) else f"{type(exc).__name__}: {exc}"
            errors.append(message if str(path) in message else f"{path}: {message}")
    return errors


def _tools_digest(config: EnvConfig) -> str:
    """A digest of what an environment's tools are, for the cache's keys: its ``tools`` section, its MCP
    servers as written and the content of every file the section names (docs/environments.md).
    """
    base = config.base_dir.resolve()
    written = {
        "tools": config.tools.model_dump(mode="json"),
        "mcpServers": {name: s.model_dump(mode="json") for name, s in config.mcp_servers_written().items()},
    }
    digest = hashlib.sha256(json.dumps(written, sort_keys=True).encode())
    named: dict[str, Path] = {}  # where a file is named from -> the file
    for text in _strings([config.tools.python, config.tools.builtin]):
        for path in _files_named(text, base):
            if path.is_relative_to(base):
                named.setdefault(path.relative_to(base).as_posix(), path)
    for name, server in config.mcp_servers().mcpServers.items():
        if server.command is None or server.cwd is None:  # a remote server names no files of ours
            continue
        cwd = Path(server.cwd)
        for text in [server.command, *server.args]:
            for path in _files_named(text, cwd):
                if path.is_relative_to(base):
                    named.setdefault(path.relative_to(base).as_posix(), path)
                elif path.is_relative_to(cwd):
                    named.setdefault(f"{name}:{path.relative_to(cwd).as_posix()}", path)
    for where, path in sorted(named.items()):
        digest.update(f"\0{where}\0".encode())
        digest.update(_fingerprint(path))
    return digest.hexdigest()[:16]


# Files up to this size count by their content; larger ones (a corpus) by size and modification time, which a
# move keeps, so that loading an environment never reads gigabytes.
_HASHED_FILE_MAX = 64 * 2**20


def _strings(value: Any) -> Iterable[str]:
    """Every string in a config's data, dict keys excluded."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _files_named(text: str, start: Path) -> list[Path]:
    """The files that ``text`` may name, a relative path taken from ``start``: a path (``tools.py``), a
    Python tool reference (``tools.py:search``, ``pkg.tools:search``) or a ``--flag=path`` argument."""
    target = text.partition(":")[0] if not Path(text).is_absolute() else text
    candidates = {text, target, text.partition("=")[2]}
    if target and all(part.isidentifier() for part in target.split(".")):
        module = Path(*target.split("."))
        candidates |= {f"{module}.py", str(module / "__init__.py")}
    found = []
    for candidate in filter(None, candidates):
        try:
            path = (start / Path(candidate).expanduser()).resolve()
            if path.is_file():
                found.append(path)
        except (OSError, ValueError, RuntimeError):  # no path at all (a NUL, a name too long, a loop)
            continue
    return found


def _fingerprint(path: Path) -> bytes:
    """The file's content digest, or its size and modification time when it is over :data:`_HASHED_FILE_MAX`."""
    try:
        stat = path.stat()
        if stat.st_size > _HASHED_FILE_MAX:
            return f"{stat.st_size}:{stat.st_mtime_ns}".encode()
        return hashlib.sha256(path.read_bytes()).digest()
    except OSError as exc:  # unreadable now: say so in the digest rather than fail a load that got this far
        return f"unreadable:{exc.errno}".encode()
