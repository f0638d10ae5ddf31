"""The episode lifecycle: per-trajectory state made from the dataset row and torn down when it ends.

An environment's ``episode:`` names a setup (and a teardown); :class:`Episodes` runs them under their
deadlines, keyed by the trajectory's id, and counts them. The order setup -> turns -> rewards -> teardown
and what each failure does: docs/environments.md#episode-state. Tool backends that keep something per
trajectory (MCP servers of ``scope: trajectory``) are begun and ended with each episode; an environment with
such a server and no ``episode:`` has the lifecycle all the same, with an empty state.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..redaction import excerpt
from ..runtime.calls import UserCode
from ..runtime.user_code import import_target
from ..tools.episode_state import NO_EPISODE, PerTrajectory
from .config import EnvConfigError, EpisodeConfig

logger = logging.getLogger(__name__)

RunOn = Callable[[Coroutine[Any, Any, Any]], Awaitable[Any]]
"""Where setup and teardown are awaited: the tool executor's loop, so async state lives beside the tools."""


class EpisodeSetupError(RuntimeError):
    """The episode's setup raised, timed out or returned nothing: its trajectory ends with stop ``error``."""


@dataclass(frozen=True)
class EpisodeHooks:
    """The user's setup (``row -> state``) and optional teardown (``state -> None``), sync or async."""

    setup: Callable[[dict[str, Any]], Any]
    teardown: Callable[[Any], Any] | None = None


def load_hooks(config: EpisodeConfig, base_dir: Path) -> EpisodeHooks:
    """Resolve ``episode.setup`` / ``episode.teardown`` like tools and rewards; a class named by ``setup``
    is instantiated once and its ``setup`` and ``teardown`` methods used. Raises :class:`EnvConfigError`."""
    setup = _resolve("episode.setup", config.setup, base_dir)
    teardown = _resolve("episode.teardown", config.teardown, base_dir) if config.teardown else None
    if inspect.isclass(setup):
        try:
            owner = setup()
        except Exception as exc:
            raise EnvConfigError(f"episode.setup ({config.setup!r}): {type(exc).__name__}: {exc}") from exc
        if not callable(getattr(owner, "setup", None)):
            raise EnvConfigError(f"episode.setup ({config.setup!r}): the class has no setup(row) method")
        if teardown is not None and callable(getattr(owner, "teardown", None)):
            raise EnvConfigError("episode.teardown: the class named by episode.setup has its own teardown")
        setup, teardown = owner.setup, teardown or getattr(owner, "teardown", None)
    if not callable(setup) or (teardown is not None and not callable(teardown)):
        raise EnvConfigError("episode: setup and teardown must name functions or a class")
    return EpisodeHooks(setup, teardown)


def _resolve(where: str, ref: str, base_dir: Path) -> Any:
    target, _, attr = ref.partition(":")
    if not attr:
        raise EnvConfigError(f"{where} ({ref!r}): name a function as 'file.py:function' or 'module:function'")
    try:
        return getattr(import_target(target, base_dir), attr)
    except Exception as exc:
        raise EnvConfigError(f"{where} ({ref!r}): {type(exc).__name__}: {exc}") from exc


# The lifecycle's deadlines for an environment whose only per-trajectory parts are its servers.
_IMPLICIT = EpisodeConfig(setup="(none: the per-trajectory servers' lifecycle)")


class Episodes:
    """The live episode states of one environment, keyed by trajectory id.

    :meth:`open` runs setup (bounded by ``setup_timeout_s``); :meth:`close` runs teardown at most once per
    key (bounded by ``teardown_timeout_s``, never raising); :meth:`close_later` closes a state its rewards
    did not claim within ``reward_wait_s``. :attr:`live` counts states set up and not yet torn down.
    ``backends`` keep something per trajectory: begun at :meth:`open`, ended at :meth:`close` after the
    teardown; with backends and no ``config`` every state is an empty dict.
    """

    def __init__(self, config: EpisodeConfig | None, base_dir: Path, backends: Sequence[PerTrajectory] = ()):
        self.backends = tuple(backends)
        self.hooks = load_hooks(config, base_dir) if config is not None else None
        self.config = config if config is not None or not self.backends else _IMPLICIT
        self._run_on: RunOn | None = None
        self._code = UserCode("episode", kind="episode", own_loop=False, max_stuck=None)
        self._states: dict[str, Any] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._counts = dict.fromkeys(
            ("setups", "setup_errors", "teardowns", "teardown_errors", "teardown_timeouts"), 0
        )

    def run_on(self, run_on: RunOn) -> None:
        """Await setup and teardown through ``run_on`` (the executor's loop) instead of the caller's loop."""
        self._run_on = run_on

    @property
    def enabled(self) -> bool:
        """True when the environment declares ``episode:`` or has a per-trajectory tool backend."""
        return self.config is not None

    @property
    def live(self) -> int:
        """States set up and not torn down yet."""
        return len(self._states)

    def state(self, key: str | None) -> Any:
        """The live state of trajectory ``key``, or :data:`NO_EPISODE`."""
        return self._states.get(key, NO_EPISODE) if key is not None else NO_EPISODE

    def final_state(self, key: str | None, copy: Any = None) -> Any:
        """What a reward reads as ``trajectory.state``: the live state of ``key``, else ``copy`` (the JSON
        copy a rollout server sent), else ``None``."""
        live = self.state(key)
        return copy if live is NO_EPISODE else live

    async def open(self, key: str, row: dict[str, Any]) -> Any:
        """Set up trajectory ``key``'s state from its dataset row (a key still live is closed first).

        Raises :class:`EpisodeSetupError` saying why when setup fails, times out or returns ``None``."""
        assert self.config is not None, "open() needs episode: or a per-trajectory server in the environment"
        if key in self._states:
            await self.close(key)
        limit = self.config.setup_timeout_s
        try:
            # Without episode: the episode exists for its per-trajectory servers, with an empty state.
            state = (
                await asyncio.wait_for(self._call(self.hooks.setup, dict(row)), limit) if self.hooks else {}
            )
        except TimeoutError:
            self._counts["setup_errors"] += 1
            raise EpisodeSetupError(f"episode setup timed out after {limit:g} s") from None
        except Exception as exc:
            self._counts["setup_errors"] += 1
            raise EpisodeSetupError(
                excerpt(f"episode setup failed: {type(exc).__name__}: {exc}", 2000)
            ) from exc
        if state is None:
            self._counts["setup_errors"] += 1
            raise EpisodeSetupError("episode setup returned None; it must return the episode's state")
        self._counts["setups"] += 1
        self._states[key] = state
        for backend in self.backends:
            backend.begin(key)
        return state

    async def close(self, key: str | None) -> None:
        """Tear down trajectory ``key``'s state, once; a teardown that raises or hangs is counted, not raised."""
        timer = self._timers.pop(key, None) if key is not None else None
        if timer is not None:
            timer.cancel()
        if key not in self._states:
            return
        state = self._states.pop(key)
        self._counts["teardowns"] += 1
        if self.hooks is not None and self.hooks.teardown is not None:
            await self._bounded(key, "episode teardown", self._call(self.hooks.teardown, state))
        if self.backends:  # after the teardown: the server's sessions outlive nothing that may use them
            # Shielded: a release past the deadline (or a cancelled caller) goes on, and frees its session.
            release = asyncio.shield(self._on_loop(self._end(key)))
            await self._bounded(key, "per-trajectory servers' release", release)

    async def _end(self, key: str) -> None:
        await asyncio.gather(*(backend.end(key) for backend in self.backends), return_exceptions=True)

    async def _bounded(self, key: str, what: str, work: Awaitable[Any]) -> None:
        """Await ``work`` for at most ``teardown_timeout_s``; a failure or an overrun is counted and logged."""
        limit = self.config.teardown_timeout_s if self.config else 0.0
        try:
            await asyncio.wait_for(work, limit)
        except TimeoutError:
            self._counts["teardown_timeouts"] += 1
            logger.warning("%s of %s did not end within %g s; abandoned", what, key, limit)
        except Exception as exc:  # the trajectory is over: its teardown's failure is a count and a log line
            self._counts["teardown_errors"] += 1
            logger.warning("%s of %s failed: %s: %s", what, key, type(exc).__name__, exc)

    def close_later(self, key: str) -> None:
        """Close ``key`` after ``reward_wait_s`` unless :meth:`close` ran first (its rewards never came)."""
        if key not in self._states or self.config is None:
            return
        loop = asyncio.get_running_loop()

        def due() -> None:
            self._timers.pop(key, None)
            task = loop.create_task(self.close(key))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

        self._timers[key] = loop.call_later(self.config.reward_wait_s, due)

    async def close_all(self) -> None:
        """Tear down every live state (the end of a run or an evaluation)."""
        await asyncio.gather(*(self.close(key) for key in list(self._states)))

    @asynccontextmanager
    async def scope(self, key: str, row: dict[str, Any]) -> AsyncIterator[Any]:
        """``async with``: the state of trajectory ``key`` (:data:`NO_EPISODE` without ``episode:``), torn
        down when the block ends however it ends. Raises :class:`EpisodeSetupError` like :meth:`open`."""
        state = await self.open(key, row) if self.enabled else NO_EPISODE
        try:
            yield state
        finally:
            await asyncio.shield(self.close(key))

    def drain_metrics(self) -> dict[str, float]:
        """``episode/*`` counts since the last drain, and ``episode/live`` now; empty without ``episode:``."""
        if not self.enabled:
            return {}
        metrics = {f"episode/{name}": float(count) for name, count in self._counts.items()}
        metrics["episode/live"] = float(self.live)
        self._counts = dict.fromkeys(self._counts, 0)
        return metrics

    async def _call(self, fn: Callable[..., Any], arg: Any) -> Any:
        return await self._on_loop(self._code.call(fn, arg))

    async def _on_loop(self, work: Coroutine[Any, Any, Any]) -> Any:
        return await (self._run_on(work) if self._run_on is not None else work)


def snapshot(state: Any) -> Any:
    """A plain-JSON copy of ``state`` for a reward in another process: ``state.snapshot()`` when the state
    has one, else the state itself when it is plain JSON, else ``None``."""
    make = getattr(state, "snapshot", None)
    value = make() if callable(make) else state
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return None
