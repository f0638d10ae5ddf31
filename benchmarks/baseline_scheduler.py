"""The rollout benchmarks' baseline: tool calls executed synchronously inside ``step()``.

This is the pattern of ms-swift's example ``ToolCallScheduler`` (``swift/rollout/multi_turn.py``) and of
RL-Factory's ms-swift plugin: ms-swift's driver calls ``step()`` for one trajectory after another, and each
``step()`` runs that trajectory's calls one at a time before returning. So a turn's tool phase costs the sum
of every call's latency over the whole batch instead of the slowest one.

Everything else is the ``rlfactory`` scheduler's: system prompt and tool schemas, parsing, turn limits,
observation messages, token ids and loss mask, and the same environment, executor and MCP servers (called
with one call at a time, synchronously). A benchmark of the two therefore measures scheduling alone.
"""

from __future__ import annotations

from typing import Any

from swift_rlfactory.adapters.swift import RUN, RLFactoryScheduler
from swift_rlfactory.rollout.episode import record_dicts
from swift_rlfactory.tools import ToolCall


class SyncToolScheduler(RLFactoryScheduler):
    """``rlfactory`` with its tool calls moved into ``step()`` and run one after another."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.planned: dict[str, list[ToolCall]] = {}

    async def on_turn_end(self, infer_request, response_choice, current_turn: int) -> dict[str, Any]:
        """Decide whether the trajectory goes on; only remember its calls (no I/O here)."""
        episode = self.episodes.get(infer_request.uuid)
        if episode is None:
            await self.on_trajectory_start([infer_request])
            episode = self.episodes[infer_request.uuid]
        plan = self._plan(response_choice, current_turn, RUN.env(episode.env_path), episode)
        if plan.finished:
            return self._finish(infer_request, episode, plan.stop_reason, current_turn)
        self.planned[infer_request.uuid] = plan.calls
        return {"done": False}

    def step(self, infer_request, response_choice, current_turn: int) -> dict[str, Any]:
        """Run this trajectory's calls one by one, blocking, then append them as ``rlfactory`` does."""
        episode = self.episodes[infer_request.uuid]
        executor = RUN.env(episode.env_path).executor
        records = [executor.execute([call])[0] for call in self.planned.pop(infer_request.uuid)]
        episode.calls.extend(record_dicts(records, current_turn))
        episode.pending = records
        # Counted as rlfactory counts them; its context-length stop has no equivalent here (step() cannot
        # end a trajectory), and no benchmark trajectory comes near --max_length.
        episode.tokens += self._observation_tokens(records)
        return super().step(infer_request, response_choice, current_turn)
