"""The reward registry: an environment's reward spec as a weighted sum of named components.

A reward is one function of a finished :class:`~swift_rlfactory.trajectory.Trajectory` returning a float,
sync or async, with optional keyword arguments from the YAML ``args``::

    async def judged(trajectory, model="qwen-judge") -> float: ...

It is named in the environment by a built-in name (``em``, ``f1``, ``format``, ``tool_use``), by a name
registered with :func:`register_reward`, or by a ``module:function`` / ``file.py:function`` path. Names are
resolved when the environment loads, so a typo fails at start-up, not at the first reward.

Scoring runs every component of every trajectory concurrently (async rewards such as model judges overlap)
and never raises: a component that fails scores 0 for that trajectory, and the failure is counted in
``errors`` so it shows up in the logs instead of killing the run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..env.config import RewardTerm
from ..loading import import_target
from ..trajectory import Trajectory
from . import rules

logger = logging.getLogger(__name__)

RewardFn = Callable[..., float | Awaitable[float]]

_REGISTRY: dict[str, RewardFn] = {
    "em": rules.em,
    "f1": rules.f1,
    "format": rules.format_reward,
    "tool_use": rules.tool_use,
}


def register_reward(name: str) -> Callable[[RewardFn], RewardFn]:
    """Decorator registering a reward function under ``name``."""

    def wrap(fn: RewardFn) -> RewardFn:
        _REGISTRY[name] = fn
        return fn

    return wrap


def resolve_reward(name: str, base_dir: Path = Path(".")) -> RewardFn:
    """A registered name, or ``module:function`` / ``path/file.py:function`` resolved against ``base_dir``."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    target, sep, attr = name.partition(":")
    if not sep or not attr:
        known = ", ".join(sorted(_REGISTRY))
        raise ValueError(f"unknown reward {name!r}: use one of {known} or 'module:function'")
    fn = getattr(import_target(target, base_dir), attr, None)
    if not callable(fn):
        raise ValueError(f"reward {name!r}: {target!r} has no function {attr!r}")
    return fn


@dataclass
class RewardComponent:
    """A resolved reward term."""

    name: str
    fn: RewardFn
    weight: float
    args: dict[str, Any] = field(default_factory=dict)


class RewardSpec:
    """A weighted sum of reward components, scored concurrently and fault-tolerantly."""

    def __init__(self, terms: Sequence[RewardTerm], base_dir: Path = Path(".")):
        self.components: list[RewardComponent] = []
        for i, term in enumerate(terms):
            try:
                fn = resolve_reward(term.name, base_dir)
            except (ValueError, ImportError) as exc:
                raise ValueError(f"reward[{i}].name: {exc}") from None
            self.components.append(RewardComponent(term.name, fn, term.weight, dict(term.args)))
        self.errors = 0

    @property
    def names(self) -> list[str]:
        """Component names, in spec order."""
        return [c.name for c in self.components]

    async def ascore(self, trajectories: Sequence[Trajectory]) -> list[float]:
        """Score every trajectory; fills ``trajectory.rewards`` with components and ``total``."""
        jobs = [self._component(c, t) for t in trajectories for c in self.components]
        values = await asyncio.gather(*jobs)
        totals = []
        n = len(self.components)
        for i, trajectory in enumerate(trajectories):
            row = values[i * n : (i + 1) * n]
            trajectory.rewards = {c.name: v for c, v in zip(self.components, row, strict=True)}
            total = sum(c.weight * v for c, v in zip(self.components, row, strict=True))
            trajectory.rewards["total"] = total
            totals.append(total)
        return totals

    def score(self, trajectories: Sequence[Trajectory]) -> list[float]:
        """Synchronous :meth:`ascore` for callers without a running loop."""
        return asyncio.run(self.ascore(trajectories))

    async def _component(self, component: RewardComponent, trajectory: Trajectory) -> float:
        try:
            value = component.fn(trajectory, **component.args)
            if inspect.isawaitable(value):
                value = await value
            return float(value)
        except Exception:  # a broken reward must not end the training run
            self.errors += 1
            logger.exception("reward %r failed; scoring 0 for this trajectory", component.name)
            return 0.0
