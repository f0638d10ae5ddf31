"""The baseline for rollout benchmarks: tools executed synchronously inside ``step()``.

This is the pattern of ms-swift's example ``ToolCallScheduler`` (and RL-Factory's ms-swift plugin): the
driver calls ``step()`` for one trajectory after another, and each ``step()`` runs that trajectory's tool
calls one at a time before returning. Everything else - prompt rendering, parsing, the tools themselves,
the executor - is the ``rlfactory`` scheduler's, so a benchmark measures scheduling alone.

    --external_plugins benchmarks/baseline_plugin.py --multi_turn_scheduler sync_tools
"""

from __future__ import annotations

from swift.rollout import multi_turns

from swift_rlfactory.adapters.swift import RUN, RLFactoryScheduler
from swift_rlfactory.plugin import register
from swift_rlfactory.rollout.episode import record_dicts


class SyncToolScheduler(RLFactoryScheduler):
    """``rlfactory`` with its tool calls moved into ``step()`` and run one after another."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.planned: dict[str, list] = {}

    async def on_turn_end(self, infer_request, response_choice, current_turn):
        episode = self.episodes.get(infer_request.uuid)
        if episode is None:
            await self.on_trajectory_start([infer_request])
            episode = self.episodes[infer_request.uuid]
        env = RUN.env(episode.env_path)
        plan = self._plan(response_choice, current_turn, env, episode)
        if plan.finished:
            return self._finish(infer_request, episode, plan.stop_reason, current_turn)
        self.planned[infer_request.uuid] = plan.calls
        return {"done": False}

    def step(self, infer_request, response_choice, current_turn):
        episode = self.episodes[infer_request.uuid]
        env = RUN.env(episode.env_path)
        records = [env.executor.execute([call])[0] for call in self.planned.pop(infer_request.uuid)]
        episode.calls.extend(record_dicts(records, current_turn))
        episode.pending = records
        return super().step(infer_request, response_choice, current_turn)


register()
multi_turns["sync_tools"] = SyncToolScheduler
