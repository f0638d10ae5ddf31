"""How a Python tool asks for its trajectory's episode state: a parameter annotated with a marker.

``state: EpisodeState`` (or ``Annotated[MyWorld, Episode]``) is filled by the executor with the state the
environment's ``episode.setup`` made for this trajectory, and is never shown in the tool's JSON schema
(docs/environments.md#episode-state).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Annotated, Any, get_args, get_origin


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


def wants_state(annotation: Any) -> bool:
    """True when a parameter annotated ``annotation`` asks for the episode's state."""
    if get_origin(annotation) is not Annotated:
        return False
    return any(meta is Episode or isinstance(meta, Episode) for meta in get_args(annotation)[1:])
