"""The plugin's hooks into ms-swift 4.x training: the scheduler, the reward and the callback.

:func:`register` (called by ``plugin.py``) adds :class:`RLFactoryScheduler` (``--multi_turn_scheduler
rlfactory``), :class:`RLFactoryReward` (``--reward_funcs rlfactory``), :class:`RLFactoryCallback`
(``--callbacks rlfactory``) and the GRPO trainer class of ``swift_credit.py``; how they fit ms-swift's rollout
driver and where errors stop is in ``docs/run.md``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from swift.callbacks import TrainerCallback, callbacks_map
from swift.rewards import orms
from swift.rollout import MultiTurnScheduler, multi_turns
from swift.trainers import TrainerFactory

from swift_rlfactory.redaction import excerpt
from swift_rlfactory.runs import identity
from swift_rlfactory.runs.validation import STOP_FILE_VAR
from swift_rlfactory.runtime.json_api import content_text

from ..env.environment import Environment
from ..env.episode import snapshot
from ..env.prompt_size import check_prompt_room
from ..rollout.episode import TurnPlan, plan_turn, record_dicts, tool_messages
from ..rollout.ranks import timeline_metrics
from ..rollout.user import USER_STOP
from ..run_config import PLUGIN_NAME
from ..tools.calls import CallParser, call_parser
from ..tools.executor import ToolRecord
from .swift_images import attach_images, sees_images
from .swift_ranks import gather
from .swift_reward import RLFactoryReward
from .swift_run import (
    ERROR,
    INFO_KEY,
    MAX_CAUSE_CHARS,
    NOT_ROW,
    RUN,
    CompletionBudget,
    HasLogprobs,
    HasMaxLength,
    HasMaxModelLen,
    HasUuid,
    InferEngine,
    RowRequest,
    SchedulerOwner,
    trajectory_from_infos,
)
from .swift_template import call_format, set_system_prompt, turn_end_id
from .swift_timeline import StepTimeline

logger = logging.getLogger("swift_rlfactory")

WATCHDOG_GRACE_S = 5.0  # slack of the turn watchdog over the executor's own bound (see _execute)
OVERHEAD_TOKENS = 12  # role markers and <tool_response> tags around each observation or user message


@dataclass
class _Episode:
    """What the scheduler remembers about one trajectory between turns."""

    env_path: str | None
    calls: list[dict[str, Any]] = field(default_factory=list)
    pending: list[ToolRecord] = field(default_factory=list)
    tokens: int = 0
    group_size: int | None = None  # trajectories of this prompt started together (a GRPO group), if > 1
    error: str | None = None  # why it failed; its next on_turn_end ends it with stop reason "error"
    parse: CallParser | None = None  # its turns' call parser, made at its first turn's end
    key: str | None = None  # its episode state's key in env.episodes (the request uuid), once set up
    images: int = 0  # images from its tools it was shown (a vision-language model only)
    user_calls: list[dict[str, Any]] = field(default_factory=list)  # the simulated user's replies, as records
    heard: list[dict[str, Any]] = field(default_factory=list)  # the user's message, for step to append


class RLFactoryScheduler(MultiTurnScheduler):
    """Multi-turn tool calling for ms-swift: inject tools, run calls concurrently, observe, stop.

    ms-swift passes ``max_turns`` (``--max_turns``), ``tokenizer`` and ``template`` in colocate mode and
    ``infer_engine`` in server mode; the environment's ``limits.max_turns`` also applies (the smaller wins).
    """

    def __init__(self, infer_engine=None, max_turns=None, tokenizer=None, template=None, **kwargs):
        super().__init__(infer_engine, max_turns, tokenizer=tokenizer, template=template, **kwargs)
        self.episodes: dict[str, _Episode] = {}
        self._in_flight = 0  # tool calls awaited by on_turn_end now, all trajectories
        self._logged: set[tuple[str, str]] = set()  # failure kinds whose traceback was logged
        self._closing: set[asyncio.Task[None]] = set()  # server mode's teardowns in flight
        self.max_context: int | None = None
        self.reserve_tokens = 0
        if RUN.tokenizer is None:
            RUN.tokenizer = self.tokenizer
        template = self.template
        if template is not None:
            self.max_context = template.max_length if isinstance(template, HasMaxLength) else None
        elif isinstance(infer_engine, HasMaxModelLen):
            self.max_context = infer_engine.max_model_len
        self.turn_end_id = self._find_turn_end_id()
        # the format the template's tools prompt asks for; a template we cannot read stops the run here
        self.call_format = call_format(template)
        self.sees_images = sees_images(template)  # else every image from a tool reads as its note
        RUN.env(start=True)  # fail at start-up, naming the field or server, not at the first rollout

    @property
    def template(self):
        """The ms-swift template (colocate passes it; the server engine owns one)."""
        engine = self.infer_engine
        return self._template or (engine.template if isinstance(engine, InferEngine) else None)

    # -- hooks ---------------------------------------------------------------------------------
    async def on_trajectory_start(self, requests: Sequence[Any]) -> None:
        """Put the environment's system prompt and tool schemas into each new request.

        ms-swift 4.6 copies a hook's edits of ``messages`` back into the training sample but not edits of
        ``tools``, so a ``tools`` field set here would reach neither the first turn nor the training
        encode. The schemas are therefore rendered into the system message by the template's own agent
        template - the exact text the template renders for a dataset ``tools`` column - and rows that
        already carry ``tools`` are left alone.

        A request whose environment cannot be loaded (a missing or broken per-row ``env`` file) keeps its
        prompt as it is; it is generated once and ends at its first ``on_turn_end`` with stop ``error``.
        """
        prompt_tokens: dict[str, int] = {}  # GRPO repeats each prompt num_generations times: count it once
        episodes: dict[str, list[_Episode]] = defaultdict(list)
        for request in requests:
            env_path = _row_env(request)
            try:
                episode, key = self._start_episode(request, env_path, prompt_tokens)
            except Exception as exc:
                cause = self._failure("on_trajectory_start", request, exc)
                episode, key = _Episode(env_path=_text_or_none(env_path), error=cause), None
            self.episodes[request.uuid] = episode
            if key is not None:
                episodes[key].append(episode)
        for group in episodes.values():  # colocate passes whole groups; server mode one request at a time
            for episode in group:
                episode.group_size = len(group) if len(group) > 1 else None
        await asyncio.gather(*(self._set_up(request) for request in requests))

    async def _set_up(self, request) -> None:
        """Make the trajectory's episode state from its row, keyed by its uuid (each GRPO group member has
        its own); a setup that fails ends the trajectory at its first turn's end with stop ``error``."""
        episode = self.episodes[request.uuid]
        if episode.error is not None or not RUN.env(episode.env_path).episodes.enabled:
            return
        try:
            await RUN.env(episode.env_path).episodes.open(request.uuid, _row(request))
            episode.key = request.uuid
        except Exception as exc:
            episode.error = self._failure("episode setup", request, exc)

    async def on_turn_end(self, infer_request, response_choice, current_turn: int) -> dict[str, Any]:
        """Decide, and run this turn's tool calls (all trajectories of the batch await here together)."""
        episode = self.episodes.get(infer_request.uuid)
        if episode is None:  # a request that skipped on_trajectory_start (continuation of an old batch)
            await self.on_trajectory_start([infer_request])
            episode = self.episodes[infer_request.uuid]
        if episode.error is None:
            try:
                return await self._turn(infer_request, response_choice, current_turn, episode)
            except Exception as exc:
                episode.error = self._failure("on_turn_end", infer_request, exc)
        return self._finish(infer_request, episode, ERROR, current_turn)

    def check_finished(self, infer_request, response_choice, current_turn: int) -> bool:
        """Unused while ``on_turn_end`` decides; kept consistent with it for callers that ask directly."""
        return response_choice.finish_reason == "length" or current_turn >= (self.max_turns or math.inf)

    def step(self, infer_request, response_choice, current_turn: int) -> dict[str, Any]:
        """Append the observations ``on_turn_end`` produced; never blocks on I/O.

        A failure here marks the trajectory: it is generated once more and ends with stop ``error`` at the
        next ``on_turn_end``, since ``step`` cannot end a trajectory.
        """
        try:
            return self._step(infer_request, response_choice)
        except Exception as exc:
            episode = self.episodes.setdefault(infer_request.uuid, _Episode(env_path=None))
            episode.error = self._failure("step", infer_request, exc)
            return {"infer_request": infer_request}

    # -- one trajectory --------------------------------------------------------------------------
    def _start_episode(self, request, env_path: Any, prompt_tokens: dict[str, int]) -> tuple[_Episode, str]:
        """The new trajectory's episode, and its prompt as a key (the trajectories of a GRPO group share it)."""
        env = RUN.env(env_path, start=True)
        tools = None if request.tools else env.executor.schemas()
        self._set_system(request.messages, env.system_prompt, tools)
        episode = _Episode(env_path=env_path)
        key = json.dumps([request.messages, request.tools], default=str)
        if key not in prompt_tokens:
            prompt_tokens[key] = self._prompt_tokens(request)
        episode.tokens = prompt_tokens[key]
        return episode, key

    async def _turn(self, infer_request, response_choice, current_turn: int, episode: _Episode) -> dict:
        env = RUN.env(episode.env_path)
        plan = self._plan(response_choice, current_turn, env, episode, infer_request.tools)
        if plan.finished:
            return self._finish(infer_request, episode, plan.stop_reason, current_turn)
        if plan.ask_user:
            return await self._hear_user(infer_request, env, episode, current_turn)
        records = await self._execute(env, plan.calls, env.episodes.state(episode.key), episode.key)
        episode.calls.extend(record_dicts(records, current_turn))
        episode.pending = records
        episode.tokens += self._observation_tokens(records)
        if self.max_context and episode.tokens + self.reserve_tokens > self.max_context:
            return self._finish(infer_request, episode, "context", current_turn)
        return {"done": False}

    async def _execute(
        self, env: Environment, calls: Sequence[Any], state: Any, key: str | None = None
    ) -> list[ToolRecord]:
        """Run one turn's calls, bounded by a watchdog in case a tool or backend ignores its own timeout.

        The executor ends every call within ``(retries + 1)`` timeouts plus back-off once it holds its
        concurrency slots (``call_bound_s``: a tool's own timeout, such as an MCP server's ``timeout``,
        counts over ``limits.call_timeout_s``), and at most ``waves`` batches of the calls now in flight
        are ahead of it. Those may be calls of any of the environment's tools, so a wave is bounded by the
        slowest tool, not by this turn's (a fast call queued behind a patient server's is not cut). The
        watchdog waits twice that plus a grace period: it never fires while the executor keeps its limits
        (the executor itself abandons a call that swallows its cancellation), and it turns a hang inside
        the executor or a backend, which would hold the batch forever, into this trajectory's error.
        """
        limits = env.executor.limits  # this rank's share of the limits (concurrency_scope)
        self._in_flight += len(calls)
        try:
            slots = min(
                [limits.max_concurrency, *(limits.per_tool_concurrency.get(c.name, math.inf) for c in calls)]
            )
            waves = math.ceil(self._in_flight / slots)
            names = {*env.executor.tools, *(c.name for c in calls)}
            per_call = max(env.executor.call_bound_s(name) for name in names)
            deadline = 2 * waves * per_call + WATCHDOG_GRACE_S
            try:
                return await asyncio.wait_for(env.executor.aexecute(calls, state, key), deadline)
            except TimeoutError:
                raise TimeoutError(f"tool calls did not finish within the {deadline:g} s watchdog") from None
        finally:
            self._in_flight -= len(calls)

    async def _hear_user(self, infer_request, env: Environment, episode: _Episode, turn: int) -> dict:
        """The simulated user's turn (the trajectory's conversation so far, its row's goal): a message for
        ``step`` to append, the end of the conversation (``user_stop``, the message kept in the trajectory
        only), or, when the user gave no reply, stop ``error`` for this trajectory alone."""
        assert env.user is not None
        reply = await env.user.reply(infer_request.messages, _row(infer_request))
        episode.user_calls.append(reply.to_dict(turn))
        if reply.text is None:
            episode.error = excerpt(f"user: {reply.error}", MAX_CAUSE_CHARS)
            logger.warning(
                "trajectory %s ends with stop reason 'error': %s", infer_request.uuid, episode.error
            )
            return self._finish(infer_request, episode, ERROR, turn)
        message = {"role": "user", "content": reply.text}
        if env.user.rule.stops(reply.text):
            return self._finish(infer_request, episode, USER_STOP, turn, last=message)
        episode.heard = [message]
        episode.tokens += self._text_tokens(reply.text) + OVERHEAD_TOKENS
        if self.max_context and episode.tokens + self.reserve_tokens > self.max_context:
            return self._finish(infer_request, episode, "context", turn)
        return {"done": False}

    def _step(self, infer_request, response_choice) -> dict[str, Any]:
        episode = self.episodes[infer_request.uuid]
        messages = tool_messages(episode.pending)
        if self.sees_images:
            limits = RUN.env(episode.env_path).config.limits
            episode.images = attach_images(infer_request, messages, episode.pending, limits, episode.images)
        infer_request.messages.extend(messages + episode.heard)
        episode.pending, episode.heard = [], []
        ids = list(response_choice.token_ids or [])
        result: dict[str, Any] = {"infer_request": infer_request}
        if ids and self.turn_end_id is not None and ids[-1] == self.turn_end_id:
            # ms-swift 4.6 renders `<|im_end|>\n` again before the tool block, so the sampled end token
            # would appear twice (once with loss). Drop ours; the template's closes the turn, with loss.
            ids = ids[:-1]
            result["response_token_ids"] = ids
            result["response_loss_mask"] = [1] * len(ids)
            logprobs = _logprobs(response_choice)
            if logprobs:
                result["rollout_logprobs"] = logprobs[: len(ids)]
        return result

    def _failure(self, where: str, request: Any, exc: Exception) -> str:
        """Log an unexpected exception of one trajectory (traceback once per kind) and return its cause."""
        cause = excerpt(f"{where}: {type(exc).__name__}: {exc}", MAX_CAUSE_CHARS)
        kind = (where, type(exc).__name__)
        uuid = request.uuid if isinstance(request, HasUuid) else None
        if kind in self._logged:
            logger.warning("trajectory %s ends with stop reason 'error': %s", uuid, cause)
        else:
            self._logged.add(kind)
            logger.error("trajectory %s ends with stop reason 'error': %s", uuid, cause, exc_info=exc)
        return cause

    # -- helpers ---------------------------------------------------------------------------------
    def _plan(
        self, response_choice, current_turn: int, env: Environment, episode: _Episode, tools: Any = None
    ) -> TurnPlan:
        """What this turn asks for, under the smaller of ``--max_turns`` and the environment's limit,
        read in the format the prompt asked for (typed by the row's ``tools``, else the environment's)."""
        episode.tokens += len(response_choice.token_ids or [])
        limit = min(self.max_turns or math.inf, env.max_turns)
        if episode.parse is None:  # every format needs the names offered, the same for every turn
            episode.parse = call_parser(self.call_format, tools or env.executor.schemas())
        return plan_turn(
            response_choice.message.content or "",
            current_turn,
            limit,
            env.config.limits.max_calls_per_turn,
            response_choice.finish_reason,
            episode.parse,
            env.user.rule if env.user is not None else None,
            len(episode.user_calls),
        )

    def _finish(
        self, infer_request, episode: _Episode, stop_reason: str, turn: int, last: dict | None = None
    ) -> dict[str, Any]:
        """End the trajectory, handing its conversation (and ``last``, a message the trajectory ends with
        that is no prompt of any turn), tool and user records to the reward via rollout infos."""
        self.episodes.pop(infer_request.uuid, None)
        infos = {
            "env": episode.env_path,
            "messages": [],
            "tool_calls": episode.calls,
            "user_calls": episode.user_calls,
            "turns": turn,
            "stop_reason": stop_reason,
            "error": episode.error,
        }
        try:
            infos["messages"] = [
                {"role": m.get("role"), "content": content_text(m.get("content"))}  # parts: their text
                for m in [*infer_request.messages, *([last] if last else [])]
            ]
        except Exception as exc:  # never raise while ending: the trajectory would be lost with its batch
            infos["stop_reason"] = ERROR
            infos["error"] = episode.error or self._failure("_finish", infer_request, exc)
        if infos["stop_reason"] != ERROR:  # a failed trajectory scores 0 without its rewards
            self._prefetch_rewards(infer_request, episode, infos)
        if episode.key is not None:
            self._hand_over(episode, infos)
        if episode.images:  # the trainer encodes the sample with these (a tool message's <image> is one)
            return {"done": True, "rollout_infos": {INFO_KEY: infos, "images": list(infer_request.images)}}
        return {"done": True, "rollout_infos": {INFO_KEY: infos}}

    def _hand_over(self, episode: _Episode, infos: dict[str, Any]) -> None:
        """Leave the ended trajectory's state to its rewards, which tear it down after scoring.

        Colocated, the reward runs in this process and finds the live state by ``infos["episode"]``; it
        waits at most ``episode.reward_wait_s``. In server mode the reward runs in the trainer's process:
        it gets a JSON copy (``infos["state"]``) and the state is torn down here and now.
        """
        episodes = RUN.env(episode.env_path).episodes
        infos["episode"] = episode.key
        if self.infer_engine is None:
            episodes.close_later(episode.key)
            return
        infos["state"] = snapshot(episodes.state(episode.key))
        task = asyncio.get_running_loop().create_task(episodes.close(episode.key))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def run(self, infer_request, request_config, **kwargs):
        """Server mode's driver of one trajectory; a trajectory cancelled or failed before its end still
        has its episode state torn down."""
        try:
            return await super().run(infer_request, request_config, **kwargs)
        finally:
            episode = self.episodes.pop(infer_request.uuid, None)
            if episode is not None and episode.key is not None:
                await asyncio.shield(RUN.env(episode.env_path).episodes.close(episode.key))

    def _prefetch_rewards(self, infer_request, episode: _Episode, infos: dict[str, Any]) -> None:
        """Let rewards that can (model judges) start on the finished trajectory while the rest of the batch
        is still generating; the reward call picks their results up."""
        try:
            row = _row(infer_request)
            env = RUN.env(episode.env_path)
            trajectory = trajectory_from_infos(infos, row)
            trajectory.tool_env = env
            env.reward.prefetch(trajectory, group_size=episode.group_size)
        except Exception as exc:  # an optional head start: the reward scores it either way
            logger.warning("could not start rewards early: %s: %s", type(exc).__name__, exc)

    def _set_system(
        self, messages: list[dict[str, Any]], prompt: str | None, tools: list[dict] | None
    ) -> None:
        set_system_prompt(messages, self.template, prompt, tools)

    def _prompt_tokens(self, request) -> int:
        tokenizer = self.tokenizer
        if tokenizer is None:
            return 0
        try:
            ids = tokenizer.apply_chat_template(
                request.messages, tools=request.tools, add_generation_prompt=True, tokenize=True
            )
            # transformers 5 returns a BatchEncoding (a mapping, not a dict): len() of it counts its keys
            return len(ids["input_ids"] if isinstance(ids, Mapping) else ids)
        except Exception:  # a template that cannot render tools: estimate from characters
            return sum(len(str(m.get("content") or "")) for m in request.messages) // 3

    def _observation_tokens(self, records: Sequence[ToolRecord]) -> int:
        return sum(self._text_tokens(r.observation) + OVERHEAD_TOKENS for r in records)

    def _text_tokens(self, text: str) -> int:
        tokenizer = self.tokenizer
        if tokenizer is None:
            return len(text) // 3
        return len(tokenizer.encode(text, add_special_tokens=False))

    def _find_turn_end_id(self) -> int | None:
        """The end-of-turn token that ChatML templates render again before a tool block, if any."""
        return turn_end_id(self.tokenizer, self.template)


def _row(request: Any) -> dict[str, Any]:
    """The request's dataset row as rewards see it (ms-swift's bookkeeping keys left out)."""
    data = request.data_dict if isinstance(request, RowRequest) else None
    return {k: v for k, v in (data or {}).items() if k not in NOT_ROW} if isinstance(data, dict) else {}


def _row_env(request: Any) -> Any:
    """The row's ``env`` column, if the dataset has one (validated by ``RUN.env``)."""
    data = request.data_dict if isinstance(request, RowRequest) else None
    return data.get("env") if isinstance(data, dict) else None


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _logprobs(choice) -> list[float]:
    logprobs = choice.logprobs if isinstance(choice, HasLogprobs) else None
    if not logprobs or "content" not in logprobs:
        return []
    return [item["logprob"] for item in logprobs["content"]]


class RLFactoryCallback(TrainerCallback):
    """Gives the scheduler and reward the trainer (for metrics) and the run's completion budget, and logs
    where each step's time went (``timeline/*``, see :mod:`.swift_timeline`)."""

    timeline: StepTimeline | None = None

    def on_step_begin(self, args, state, control, **kwargs):
        if self.timeline is not None:
            self.timeline.begin_step()

    def on_step_end(self, args, state, control, **kwargs):
        if self.timeline is not None:  # a training step's timeline over all ranks, whatever else it logs
            for key, value in timeline_metrics(gather(self.timeline.end_step())).items():
                self.trainer._metrics["train"][key].append(value)
        stop = os.environ.get(STOP_FILE_VAR)
        if stop and os.path.exists(stop):  # train's validation raised an alarm (--val-stop-on-alarm)
            logger.warning("%s exists: stopping after step %s", stop, state.global_step)
            control.should_training_stop = True

    def on_train_begin(self, args, state, control, **kwargs):
        trainer = self.trainer
        self.timeline = StepTimeline()
        hooked = self.timeline.install(trainer)
        logger.info("step timeline hooks: %s", ", ".join(hooked))
        RUN.trainer = trainer
        RUN.tokenizer = RUN.tokenizer or kwargs.get("processing_class")
        scheduler = trainer.multi_turn_scheduler if isinstance(trainer, SchedulerOwner) else None
        if isinstance(scheduler, RLFactoryScheduler):
            budget = args.max_completion_length if isinstance(args, CompletionBudget) else None
            scheduler.reserve_tokens = budget or 0
            check_prompt_room(RUN.env().prompt_size(), scheduler.max_context, scheduler.reserve_tokens)


def register() -> None:
    """Add the scheduler, reward and callback to ms-swift's registries under the name ``rlfactory``."""
    multi_turns[PLUGIN_NAME] = RLFactoryScheduler
    orms[PLUGIN_NAME] = RLFactoryReward
    callbacks_map[PLUGIN_NAME] = RLFactoryCallback
    identity.tag_log_lines()
    TrainerFactory.TRAINER_MAPPING["grpo"] = "swift_rlfactory.adapters.swift_credit.CreditGRPOTrainer"
