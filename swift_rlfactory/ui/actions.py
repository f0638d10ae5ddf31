"""What the Agent RL tab's buttons do, as plain functions of plain values (no gradio here), so the same code
answers the browser and a unit test; environments stay loaded between clicks (docs/ui.md).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..env.config import EnvConfigError
from ..env.environment import Environment
from ..env.episode import EpisodeSetupError
from ..rewards.rescore import Recorded, rescore
from ..rollout.episode import tool_messages
from ..trajectory import Trajectory


@dataclass
class Validation:
    """The outcome of loading an environment file."""

    ok: bool
    message: str
    tools: list[dict[str, Any]]


class Environments:
    """Loaded, started environments by path; a changed file is loaded again."""

    def __init__(self) -> None:
        self._envs: dict[str, tuple[float, Environment]] = {}
        self._lock = threading.Lock()

    def get(self, path: str | Path) -> Environment:
        """The environment in ``path``, started; raises ``EnvConfigError`` naming the bad field."""
        key = str(Path(path).expanduser().resolve())
        mtime = Path(key).stat().st_mtime
        with self._lock:
            cached = self._envs.get(key)
            if cached and cached[0] == mtime:
                return cached[1]
            if cached:
                cached[1].close()
            env = Environment.load(key).start()
            self._envs[key] = (mtime, env)
            return env

    def close(self) -> None:
        """Stop every environment's MCP servers."""
        with self._lock:
            for _, env in self._envs.values():
                env.close()
            self._envs.clear()


def validate(envs: Environments, path: str) -> Validation:
    """Load ``path`` as the CLI does; on failure the message names the field, as ``tools list`` does."""
    if not path or not Path(path).expanduser().is_file():
        return Validation(False, f"invalid environment: no such file {path!r}", [])
    try:
        env = envs.get(path)
    except EnvConfigError as exc:
        return Validation(False, f"invalid environment: {exc}", [])
    except Exception as exc:  # a server that will not start, a tool module that does not import
        return Validation(False, f"environment failed to start: {type(exc).__name__}: {exc}", [])
    tools = [
        {"name": name, "description": tool.spec.description, "parameters": tool.spec.parameters}
        for name, tool in env.executor.tools.items()
    ]
    return Validation(True, f"valid environment {env.name!r}: {len(tools)} tools", tools)


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """A skeleton of a tool's arguments from its JSON schema, to edit before running."""
    blank = {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}
    properties = schema.get("properties") or {}
    return {name: blank.get(str(spec.get("type"))) for name, spec in properties.items()}


@dataclass
class ToolResult:
    """One tool call as the page shows it."""

    observation: str  # the ``tool`` message content the model would see
    error: str | None
    details: str  # latency, cache status, attempts


def call_tool(envs: Environments, path: str, name: str, arguments: str) -> ToolResult:
    """Run one real call through the environment's executor (timeout, retry, cache, truncation), in a
    scratch episode when the environment declares ``episode:``."""
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return ToolResult("", f"arguments are not valid JSON: {exc}", "")
    if not isinstance(args, dict):
        return ToolResult("", "arguments must be a JSON object", "")
    try:
        env = envs.get(path)
    except Exception as exc:
        return ToolResult("", f"invalid environment: {exc}", "")
    if name not in env.executor.tools:
        known = ", ".join(env.executor.tools) or "none"
        return ToolResult("", f"unknown tool {name!r}; available: {known}", "")
    try:
        record = env.try_tool(name, args)
    except EpisodeSetupError as exc:
        return ToolResult("", str(exc), "")
    [message] = tool_messages([record])
    status = "hit" if record.cache_hit else "miss"
    details = f"latency {record.latency_s * 1000:.1f} ms · cache {status} · attempts {record.attempts}"
    return ToolResult(message["content"], record.error, details)


def score(envs: Environments, path: str, record: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """Rescore one trajectory exactly as ``swift-rlfactory rewards`` does: the record with its rewards
    replaced by what the reward spec gives now, and the seconds it took.
    """
    if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
        raise ValueError("a trajectory is a JSON object with 'messages': a list of {role, content}")
    env = envs.get(path)
    recorded_total = (record.get("rewards") or {}).get("total")
    trajectory = Trajectory.from_dict({**record, "rewards": {}, "turn_rewards": {}, "reward_errors": {}})
    trajectory.tool_env = env  # tool-verified rewards call the env's tools, as in training
    total = float(recorded_total) if isinstance(recorded_total, int | float) else None
    start = time.perf_counter()
    [row] = rescore([Recorded(0, trajectory, total)], env.reward).rows
    scored = {
        **record,
        "rewards": row.rewards,
        "turn_rewards": row.turn_rewards,
        "reward_errors": row.reward_errors,
    }
    return scored, time.perf_counter() - start
