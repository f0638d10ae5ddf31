"""How a tool reaches its trajectory's episode: a Python tool's state parameter, or the trajectory's id.

``state: EpisodeState`` (or ``Annotated[MyWorld, Episode]``) is filled by the executor with the state the
environment's ``episode.setup`` made for this trajectory, and is never shown in the tool's JSON schema. A
backend that keeps something per trajectory (an MCP server of ``scope: trajectory``, persistent
``run_python``) reads the id from :data:`current_episode` and is ended at the episode's teardown
(docs/environments.md#episode-state).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Annotated, Any, Protocol, get_args, get_origin, runtime_checkable


class Episode:
    """Marks a tool parameter that receives the episode's state: ``Annotated[SomeType, Episode]``."""


EpisodeState = Annotated[Any, Episode]
"""A tool parameter of this type receives the trajectory's episode state (whatever ``setup`` returned)."""


class _NoEpisode:
    """The value of :data:`current_state` outside an episode."""

    def __repr__(self) -> str:
        return "NO_EPISODE"


NO_EPISODE: Any = _NoEpisode()

current_state: ContextVar[Any] = ContextVar("rlfactory_episode_state", default=NO_EPISODE)
"""The state of the trajectory whose tool calls run in this context (set by the executor per batch)."""

current_episode: ContextVar[str | None] = ContextVar("rlfactory_episode_key", default=None)
"""The id of the live trajectory whose tool calls run in this context (``None`` outside one): what keys an
MCP server of ``scope: trajectory`` to that trajectory's own session."""


@runtime_checkable
class PerTrajectory(Protocol):
    """A tool backend that keeps something per trajectory (an MCP server of ``scope: trajectory``, a
    persistent ``run_python``).

    The episode lifecycle calls :meth:`begin` when a trajectory's episode opens (it may then hold something
    for it) and :meth:`end` when it is torn down (everything it held for the trajectory is released).
    """

    def begin(self, key: str) -> None:
        """Trajectory ``key`` is live: its calls may now take what the backend keeps per trajectory."""
        ...

    async def end(self, key: str) -> None:
        """Trajectory ``key`` ended: release what it held (on the tools' loop); never raises."""
        ...


def per_episode(tool: Any) -> bool:
    """True when ``tool``'s results depend on its trajectory (a state parameter, a per-trajectory backend),
    so that they are never cached; a renamed tool is judged by the one it wraps."""
    tool = getattr(tool, "inner", tool)
    return bool(getattr(tool, "state_params", ())) or getattr(tool, "per_trajectory", False) is True


def wants_state(annotation: Any) -> bool:
    """True when a parameter annotated ``annotation`` asks for the episode's state."""
    if get_origin(annotation) is not Annotated:
        return False
    return any(meta is Episode or isinstance(meta, Episode) for meta in get_args(annotation)[1:])
