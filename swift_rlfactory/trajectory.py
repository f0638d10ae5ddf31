"""A finished trajectory: the conversation, what the tools did, and the dataset row it came from.

The one object rewards, metrics, the trajectory log and evaluation read; it holds text, never token
ids. Its fields and how a reward calls tools through it: docs/environments.md#the-trajectory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Protocol

from swift_rlfactory.data.answers import reference_answers


class ToolEnv(Protocol):
    """What :meth:`Trajectory.call_tool` needs: an environment that runs one tool call by name."""

    async def call_tool(self, name: str, arguments: dict[str, Any], **episode: Any) -> Any:
        """Run the call (``state=`` the episode's, when the trajectory has one; ``episode=`` its id, which
        keys its sessions of per-trajectory MCP servers); returns its ``ToolRecord`` (a failure is a record
        with ``error`` set)."""
        ...


@dataclass
class Trajectory:
    """One sampled episode (each field: docs/environments.md#the-trajectory).

    Attributes:
        messages: the whole conversation as ``{"role", "content"}`` dicts with text content.
        tool_calls: one dict per executed tool call (``ToolRecord.to_dict()``) plus its ``turn`` index.
        turns: assistant turns generated.
        stop_reason: why the episode ended (``answer``, ``max_turns``, ``context``, ``length``, ``user_stop``,
            ``max_user_turns``, ``error``).
        row: the dataset row's other fields (``golden_answers``, ``solution``, ...), for rewards.
        rewards: reward components and the weighted total (a per-turn component: its mean over turns).
        turn_rewards: per-turn component -> one score per assistant turn, and ``"total"``.
        reward_errors: component name -> why it scored its fallback (``timeout``, ``non_finite``, ...).
        tool_env: the environment whose tools :meth:`call_tool` reaches; never serialised.
        state: the episode's final state (what the environment's ``episode.setup`` made, as its tools left
            it), ``None`` without ``episode:``; torn down after the rewards; never serialised.
        episode_key: the trajectory's id while its episode is live (what keys its sessions of MCP servers of
            ``scope: trajectory``, which :meth:`call_tool` reaches); never serialised.
        error: with stop reason ``error``, where and why.
        user_calls: one dict per reply asked of a simulated user (``UserReply.to_dict``), with its ``turn``.
    """

    messages: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    stop_reason: str = ""
    row: dict[str, Any] = field(default_factory=dict)
    rewards: dict[str, float] = field(default_factory=dict)
    turn_rewards: dict[str, list[float]] = field(default_factory=dict)
    reward_errors: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    tool_env: ToolEnv | None = field(default=None, repr=False, compare=False)
    state: Any = field(default=None, repr=False, compare=False)
    user_calls: list[dict[str, Any]] = field(default_factory=list)
    episode_key: str | None = field(default=None, repr=False, compare=False)

    @property
    def final_response(self) -> str:
        """Text of the last assistant message (empty if the model never spoke)."""
        for message in reversed(self.messages):
            if message.get("role") == "assistant":
                return message.get("content") or ""
        return ""

    @property
    def assistant_turns(self) -> list[str]:
        """Text of every assistant turn the rollout generated, in order: what per-turn rewards score.

        Index ``i`` is turn ``i + 1``; assistant messages the row brought as chat history are not turns.
        """
        texts = [m.get("content") or "" for m in self.messages if m.get("role") == "assistant"]
        return texts[history_turns(self.messages, self.turns) :]

    @property
    def golden_answers(self) -> list[str]:
        """Reference answers from the row, by the rule of :mod:`swift_rlfactory.data.answers`."""
        return reference_answers(self.row)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        """Run one of the environment's tools and return its ``ToolRecord`` (``observation``, ``error``,
        ``ok``, ...). A tool that fails, times out or does not exist gives a record with ``error`` set,
        never an exception, so a tool-verified reward turns failures into a score."""
        if self.tool_env is None:
            raise RuntimeError(
                "this trajectory has no environment attached: call_tool works in rewards run by "
                "--reward_funcs rlfactory and by swift-rlfactory eval"
            )
        episode: dict[str, Any] = {} if self.state is None else {"state": self.state}
        if self.episode_key is not None:
            episode["episode"] = self.episode_key
        return await self.tool_env.call_tool(name, dict(arguments or {}), **episode)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form for ``trajectories.jsonl`` (without the attached environment and state)."""
        data = asdict(replace(self, tool_env=None, state=None))
        for private in ("tool_env", "state", "episode_key"):
            data.pop(private)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        """The inverse of :meth:`to_dict`; keys that are not fields (a log line's ``step``, ``time``) are
        ignored. Raises ``TypeError`` when ``messages`` is missing."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def history_turns(messages: list[dict[str, Any]], turns: int) -> int:
    """How many leading assistant messages of ``messages`` are the dataset row's chat history.

    The rollout's ``turns`` generated turns are the last ones; ``turns`` 0 means unknown: none is history.
    """
    assistant = sum(1 for m in messages if m.get("role") == "assistant")
    return max(assistant - turns, 0) if turns > 0 else 0
