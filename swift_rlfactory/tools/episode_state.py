"""How a tool reaches its trajectory's episode: a Python tool's state parameter, or the trajectory's id.

``state: EpisodeState`` (or ``Annotated[MyWorld, Episode]``) is filled by the executor with the state the
environment's ``episode.setup`` made for this trajectory, and is never shown in the tool's JSON schema. A
provider that keeps something per trajectory (persistent ``run_python``) reads the id from
:data:`current_episode` and is released at the episode's teardown (docs/environments.md#episode-state).
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


current_episode: ContextVar[str | None] = ContextVar("rlfactory_episode", default=None)
"""The id of the trajectory whose tool calls run in this context (``None`` outside one)."""


@runtime_checkable
class EpisodeScoped(Protocol):
    """A tool provider that keeps something per trajectory (``per_episode`` true): :meth:`release` is
    awaited with the trajectory's id when its episode is torn down."""

    per_episode: bool

    async def release(self, episode: str) -> None:
        """Free what trajectory ``episode`` holds; safe for an id that holds nothing."""
        ...


def per_episode(tool: Any) -> bool:
    """True when ``tool``'s results depend on its trajectory (a state parameter, a per-trajectory backend),
    so that they are never cached; a renamed tool is judged by the one it wraps."""
    tool = getattr(tool, "inner", tool)
    return bool(getattr(tool, "state_params", ())) or getattr(tool, "per_episode", False) is True


def wants_state(annotation: Any) -> bool:
    """True when a parameter annotated ``annotation`` asks for the episode's state."""
    if get_origin(annotation) is not Annotated:
        return False
    return any(meta is Episode or isinstance(meta, Episode) for meta in get_args(annotation)[1:])
