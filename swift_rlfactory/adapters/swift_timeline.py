"""Where a GRPO step's time goes: per-phase seconds logged to ``logging.jsonl`` next to ms-swift's metrics.

:class:`StepTimeline` wraps one trainer instance's phase methods (never its class); each phase is charged
only its own time, so the phases sum to the step. The ``timeline/*`` metrics: docs/ms-swift.md.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from functools import wraps
from typing import Any

PREFIX = "timeline/"
PHASES = ("generation", "tools", "reward", "weight_sync", "train")

# trainer method -> the phase its own time is charged to
_SYNC_HOOKS = {
    "training_step": "train",
    "_generate_completions": "generation",
    "_score_completions": "reward",
    "_move_model_to_vllm": "weight_sync",
}


class StepTimeline:
    """Accumulates exclusive seconds per phase between :meth:`begin_step` and :meth:`end_step`."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self.seconds: dict[str, float] = defaultdict(float)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._step_start: float | None = None
        self._tools_running = 0
        self._tools_since = 0.0
        self._tools_frame: list | None = None
        self._chain: dict[Any, float] = defaultdict(float)

    # -- installing ------------------------------------------------------------------------------
    def install(self, trainer: Any) -> list[str]:
        """Wrap the trainer's phase methods (those it has) and its scheduler's ``on_turn_end``; returns the
        hooked names, so a missing hook (another ms-swift version) can be reported."""
        hooked = []
        for name, phase in _SYNC_HOOKS.items():
            method = getattr(trainer, name, None)
            if callable(method):
                setattr(trainer, name, self._timed(method, phase))
                hooked.append(name)
        scheduler = getattr(trainer, "multi_turn_scheduler", None)
        if scheduler is not None and callable(getattr(scheduler, "on_turn_end", None)):
            scheduler.on_turn_end = self._timed_turn_end(scheduler.on_turn_end)
            hooked.append("on_turn_end")
        return hooked

    def _timed(self, method: Callable, phase: str) -> Callable:
        @wraps(method)
        def wrapper(*args, **kwargs):
            with self.phase(phase):
                return method(*args, **kwargs)

        return wrapper

    def _timed_turn_end(self, on_turn_end: Callable) -> Callable:
        @wraps(on_turn_end)
        async def wrapper(infer_request, *args, **kwargs):
            start = self._tool_started()
            try:
                return await on_turn_end(infer_request, *args, **kwargs)
            finally:
                self._tool_finished(getattr(infer_request, "uuid", id(infer_request)), start)

        return wrapper

    # -- measuring -------------------------------------------------------------------------------
    def phase(self, name: str) -> _Phase:
        """Context manager charging its own time (less nested phases) to ``name``."""
        return _Phase(self, name)

    def _stack(self) -> list[list]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _tool_started(self) -> float:
        now = self.clock()
        with self._lock:
            if self._tools_running == 0:
                self._tools_since = now
                stack = self._stack()
                self._tools_frame = stack[-1] if stack else None
            self._tools_running += 1
        return now

    def _tool_finished(self, trajectory: Any, start: float) -> None:
        now = self.clock()
        with self._lock:
            self._chain[trajectory] += now - start
            self._tools_running -= 1
            if self._tools_running == 0:
                span = now - self._tools_since
                self.seconds["tools"] += span
                if self._tools_frame is not None:  # the phase the tools ran inside is not charged for them
                    self._tools_frame[1] += span

    def begin_step(self) -> None:
        """Start a new optimizer step (the callback's ``on_step_begin``)."""
        self.seconds.clear()
        self._chain.clear()
        self._step_start = self.clock()

    def end_step(self) -> dict[str, float]:
        """The step's metrics (``timeline/*``); empty if no step was begun."""
        if self._step_start is None:
            return {}
        step = self.clock() - self._step_start
        self._step_start = None
        metrics = {f"{PREFIX}{name}_s": self.seconds.get(name, 0.0) for name in PHASES}
        metrics[f"{PREFIX}tool_chain_s"] = max(self._chain.values(), default=0.0)
        metrics[f"{PREFIX}other_s"] = max(0.0, step - sum(self.seconds.get(name, 0.0) for name in PHASES))
        metrics[f"{PREFIX}step_s"] = step
        for name in (*PHASES, "other"):
            metrics[f"{PREFIX}share/{name}"] = metrics[f"{PREFIX}{name}_s"] / step if step > 0 else 0.0
        return metrics


class _Phase:
    """One timed region; its frame is ``[name, seconds spent in nested phases]``."""

    def __init__(self, timeline: StepTimeline, name: str):
        self.timeline, self.name = timeline, name

    def __enter__(self) -> None:
        self.frame = [self.name, 0.0]
        self.start = self.timeline.clock()
        self.timeline._stack().append(self.frame)

    def __exit__(self, *exc) -> None:
        timeline = self.timeline
        elapsed = timeline.clock() - self.start
        stack = timeline._stack()
        stack.pop()
        with timeline._lock:
            timeline.seconds[self.name] += max(0.0, elapsed - self.frame[1])
            if stack:
                stack[-1][1] += elapsed
