"""Clocks around a multi-turn scheduler's hooks: how a rollout's wall time splits into generation and tools.

ms-swift's colocate driver (``swift/rollout/agent_loop.py``) runs a batch turn by turn: generate for every
pending trajectory, await ``on_turn_end`` for all of them together, then call ``step()`` for each one that
continues. So, per turn, the *tool phase* is the span from the first ``on_turn_end`` entry to the last
``step()`` exit (for ``rlfactory`` the tools run in ``on_turn_end``; for the baseline in ``step()``), and
*generation* is what lies between one turn's tool phase and the next (or, for the first turn, between
``on_trajectory_start`` and the first ``on_turn_end``).

:class:`RolloutClock` wraps those three hooks of one scheduler instance, identically for every scheduler,
so the schedulers under test run unmodified. :class:`ProbeCallback` (``--callbacks rollout_probe``)
attaches a clock when training starts and writes one line per optimizer step to
``<output_dir>/rollout_timeline.jsonl``.
"""

from __future__ import annotations

import functools
import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from swift.callbacks import TrainerCallback

TIMELINE_FILE = "rollout_timeline.jsonl"


@dataclass
class Phase:
    """One turn's tool phase, across the whole batch."""

    turn: int
    seconds: float
    trajectories: int  # on_turn_end calls in this phase
    calls: int  # tool calls executed in this phase


@dataclass
class RolloutTiming:
    """The clocked parts of the rollouts since the last :meth:`RolloutClock.take`."""

    rollout_s: float = 0.0  # on_trajectory_start entry to the last tool phase's end, summed over batches
    generation_s: float = 0.0
    tool_s: float = 0.0
    phases: list[Phase] = field(default_factory=list)

    @property
    def tool_turns(self) -> int:
        """Turns in which at least one tool call ran: each costs one tool latency at best."""
        return sum(1 for p in self.phases if p.calls)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON, with the derived counts."""
        out = asdict(self)
        out["tool_turns"] = self.tool_turns
        out["calls"] = sum(p.calls for p in self.phases)
        return out


class RolloutClock:
    """Times generation and tool phases of one scheduler (a ``RLFactoryScheduler`` or a subclass)."""

    def __init__(self, scheduler: Any):
        self.scheduler = scheduler
        self.timing = RolloutTiming()
        self._batch_start: float | None = None
        self._gen_start: float | None = None  # set while generating
        self._phase: dict[str, Any] | None = None  # set while in a tool phase
        self._calls_before: dict[str, int] = {}
        self._wrap()

    def take(self) -> RolloutTiming:
        """Close what is open and return the timing gathered so far, starting a fresh one."""
        self._close_batch()
        timing, self.timing = self.timing, RolloutTiming()
        return timing

    # -- the three hooks -------------------------------------------------------------------------
    def _wrap(self) -> None:
        sched = self.scheduler
        start, turn_end, step = sched.on_trajectory_start, sched.on_turn_end, sched.step

        @functools.wraps(start)
        async def on_trajectory_start(requests):
            began = time.perf_counter()  # the hook's own work is rollout time the model is not generating
            self._close_batch()
            await start(requests)
            self._batch_start, self._gen_start = began, time.perf_counter()

        @functools.wraps(turn_end)
        async def on_turn_end(request, choice, turn):
            self._enter_phase(turn)
            episode = sched.episodes.get(request.uuid)
            self._calls_before[request.uuid] = len(episode.calls) if episode else 0
            self._phase["trajectories"] += 1
            try:
                return await turn_end(request, choice, turn)
            finally:
                self._phase["last"] = time.perf_counter()

        @functools.wraps(step)
        def wrapped_step(request, choice, turn):
            try:
                return step(request, choice, turn)
            finally:
                episode = sched.episodes.get(request.uuid)
                if episode is not None and self._phase is not None:
                    self._phase["calls"] += len(episode.calls) - self._calls_before.pop(request.uuid, 0)
                    self._phase["stepped"] = True
                    self._phase["last"] = time.perf_counter()

        sched.on_trajectory_start, sched.on_turn_end, sched.step = (
            on_trajectory_start,
            on_turn_end,
            wrapped_step,
        )

    # -- bookkeeping -----------------------------------------------------------------------------
    def _enter_phase(self, turn: int) -> None:
        now = time.perf_counter()
        if self._phase is not None and not self._phase["stepped"]:
            return  # another trajectory of the same gathered turn
        if self._phase is not None:  # the previous turn's steps are done: generation ran since
            self._gen_start = self._phase["last"]
            self._close_phase()
        if self._gen_start is not None:
            self.timing.generation_s += now - self._gen_start
            self._gen_start = None
        if self._batch_start is None:  # a request that skipped on_trajectory_start
            self._batch_start = now
        self._phase = {
            "turn": turn,
            "start": now,
            "last": now,
            "trajectories": 0,
            "calls": 0,
            "stepped": False,
        }

    def _close_phase(self) -> None:
        phase, self._phase = self._phase, None
        if phase is None:
            return
        seconds = phase["last"] - phase["start"]
        self.timing.tool_s += seconds
        self.timing.phases.append(Phase(phase["turn"], seconds, phase["trajectories"], phase["calls"]))

    def _close_batch(self) -> None:
        end = self._phase["last"] if self._phase is not None else None
        self._close_phase()
        if self._batch_start is not None and end is not None:
            self.timing.rollout_s += end - self._batch_start
        self._batch_start = self._gen_start = None
        self._calls_before.clear()


class ProbeCallback(TrainerCallback):
    """Attaches a :class:`RolloutClock` to the trainer's scheduler; one timeline line per step."""

    def __init__(self, args: Any, trainer: Any):
        super().__init__(args, trainer)
        self.clock: RolloutClock | None = None
        self._step_start = self._step_cpu = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        scheduler = getattr(self.trainer, "multi_turn_scheduler", None)
        if scheduler is not None:
            self.clock = RolloutClock(scheduler)

    def on_step_begin(self, args, state, control, **kwargs):
        self._step_start, self._step_cpu = time.perf_counter(), time.process_time()

    def on_step_end(self, args, state, control, **kwargs):
        if self.clock is None:
            return
        row = {
            "step": state.global_step,
            "step_wall_s": time.perf_counter() - self._step_start,
            # CPU seconds of this process (all threads): on a shared machine, wall time that grows while
            # this stays put is other processes' load, not this step's work.
            "step_cpu_s": time.process_time() - self._step_cpu,
            "load_avg_1m": os.getloadavg()[0],
        }
        row.update(self.clock.take().to_dict())
        with open(os.path.join(args.output_dir, TIMELINE_FILE), "a") as f:
            f.write(json.dumps(row) + "\n")
