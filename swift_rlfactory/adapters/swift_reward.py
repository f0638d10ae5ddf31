"""The plugin's reward (``--reward_funcs rlfactory``): scores each trajectory by its environment's reward
spec, tears its episode state down after scoring, logs the trajectories and the batch's metrics over ranks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any

from swift.rewards import AsyncORM

from swift_rlfactory.redaction import excerpt
from swift_rlfactory.runs.folder import TRAJECTORIES
from swift_rlfactory.runs.log import TrajectoryLog

from ..env.environment import Environment
from ..rollout.ranks import RankBatch, batch_metrics, slim
from ..trajectory import Trajectory
from .swift_ranks import gather, start_run
from .swift_run import (
    ERROR,
    INFO_KEY,
    MAX_CAUSE_CHARS,
    RUN,
    TRAJECTORIES_VAR,
    HasOutputDir,
    TrainerState,
    build_trajectories,
)

logger = logging.getLogger("swift_rlfactory")


class RLFactoryReward(AsyncORM):
    """The environment's reward spec as one ms-swift reward; logs trajectories and tool metrics.

    Returns the weighted total per completion. Components (per-turn ones also per turn, in
    ``turn_rewards``), tool metrics and the whole decoded trajectory go to ``<output_dir>/trajectories.jsonl``
    (or ``$RLFACTORY_TRAJECTORIES``) and, with ``--callbacks rlfactory``, into the trainer's logged metrics
    as ``rlfactory/<component>``, ``rlfactory/turn/<component>`` and ``rewards/*`` (see
    :mod:`swift_rlfactory.rewards.metrics`). A trajectory log that cannot be written costs its lines, never
    the run: the failure is warned about and counted as ``log/write_errors``.
    """

    def __init__(self, args: HasOutputDir | None = None, **kwargs):
        super().__init__(args, **kwargs)
        path = os.environ.get(TRAJECTORIES_VAR)
        if path is None:
            output_dir = (args.output_dir if isinstance(args, HasOutputDir) else None) or "."
            path = os.path.join(output_dir, TRAJECTORIES)
        self.log = TrajectoryLog(path)
        start_run(args.output_dir if isinstance(args, HasOutputDir) else None)

    async def __call__(self, completions: list[str], **kwargs) -> list[float]:
        trajectories = build_trajectories(completions, kwargs, RUN.tokenizer)
        infos = [
            (info or {}).get(INFO_KEY) or {}
            for info in kwargs.get("rollout_infos") or [{}] * len(completions)
        ]
        by_env: dict[str, tuple[Any, list[int]]] = {}
        for i, trajectory in enumerate(trajectories):
            if trajectory.stop_reason == ERROR:  # failed inside the plugin: reward 0, nothing to score
                trajectory.rewards = {"total": 0.0}
            else:
                env_path = trajectory.row.get("env")
                by_env.setdefault(repr(env_path), (env_path, []))[1].append(i)
        totals = [0.0] * len(trajectories)
        scored = []
        for env_path, indices in by_env.values():
            try:
                env = RUN.env(env_path)
            except Exception as exc:  # e.g. a per-row env of a row another scheduler rolled out
                cause = excerpt(f"reward: {type(exc).__name__}: {exc}", MAX_CAUSE_CHARS)
                logger.error("%d trajectories end with stop reason 'error': %s", len(indices), cause)
                for i in indices:
                    trajectories[i].stop_reason, trajectories[i].error = ERROR, cause
                    trajectories[i].rewards = {"total": 0.0}
                continue
            scored.append(env)
            group = [trajectories[i] for i in indices]
            for trajectory in group:  # tool-verified rewards: trajectory.call_tool uses this env's executor
                trajectory.tool_env = env
            keys = [infos[i].get("episode") for i in indices]
            for trajectory, i in zip(group, indices, strict=True):  # live here, a JSON copy from a server
                trajectory.state = env.episodes.final_state(infos[i].get("episode"), infos[i].get("state"))
                trajectory.episode_key = infos[i].get("episode")
            try:
                scores = await env.reward.ascore(group)
            finally:  # teardown after the rewards have read the final state
                await asyncio.gather(*(env.episodes.close(key) for key in keys))
            for i, score in zip(indices, scores, strict=True):
                totals[i] = score
        for trajectory, info in zip(trajectories, infos, strict=True):  # failed ones: torn down unscored
            if trajectory.stop_reason == ERROR and info.get("episode"):
                with contextlib.suppress(Exception):  # an env that no longer loads: its reward-wait timer
                    await RUN.env(trajectory.row.get("env")).episodes.close(info["episode"])
        RUN.keep_turn_rewards(kwargs.get("request_id"), trajectories)
        # ms-swift scores a step's rollouts while global_step still counts the updates done before it, so
        # the step a trajectory feeds is global_step + 1: the number the console and logging.jsonl show.
        state = kwargs.get("trainer_state")
        done = state.global_step if isinstance(state, TrainerState) else None
        self.log.write(trajectories, step=None if done is None else done + 1)
        RUN.log_metrics(batch_metrics(gather(self._part(trajectories, scored))))
        return totals

    def _part(self, trajectories: list[Trajectory], scored: list[Environment]) -> RankBatch:
        """This rank's part of the batch's metrics (:mod:`swift_rlfactory.rollout.ranks`)."""
        part = RankBatch([slim(t) for t in trajectories])
        part.counts["log/write_errors"] = (
            self.log.drain_errors()
        )  # a failed write is warned once, then counted
        for env in scored:
            judged, other = env.reward.drain_parts()
            part.judge = part.judge.merge(judged)
            part.other.update(other)
            for name, count in env.episodes.drain_metrics().items():  # counts: they add up over ranks
                part.counts[name] = part.counts.get(name, 0) + count
            if env.executor.cache is not None:  # each failure cost a cache hit, never a call
                part.counts["tools/cache_errors"] = (
                    part.counts.get("tools/cache_errors", 0) + env.executor.cache.drain_errors()
                )
        return part
