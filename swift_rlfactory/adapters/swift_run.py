"""What the ms-swift hooks share in one process: the typed faces of ms-swift's objects they touch, and the
run's loaded environments, trainer and tokenizer (:data:`RUN`)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..env.config import EnvConfigError
from ..env.environment import Environment
from ..run_config import ENV_VAR, PLUGIN_NAME
from ..runtime.json_api import content_text
from ..trajectory import Trajectory

logger = logging.getLogger("swift_rlfactory")

INFO_KEY = "rlfactory"  # the scheduler's key in rollout_infos
TRAJECTORIES_VAR = "RLFACTORY_TRAJECTORIES"  # where the reward logs trajectories, if not the output dir
ERROR = "error"  # the stop reason of a trajectory that failed inside the plugin
MAX_CAUSE_CHARS = 2000  # an error cause kept in rollout infos and the trajectory log (redacted, then cut)
BROKEN_RETRY_S = 300.0  # how long a broken environment file fails fast before it is tried again

# Reward-kwarg keys that are ms-swift's bookkeeping, not dataset fields a reward should see as the row.
NOT_ROW = {
    "trainer_state",
    "messages",
    "prompt_id",
    "request_id",
    "finish_reason",
    "is_truncated",
    "rollout_infos",
    "response_token_ids",
    "tools",
    "trajectory_inputs",
    "completions",
}


# -- the parts of ms-swift's objects the hooks use (ms-swift 4.6) --------------------------------------
@runtime_checkable
class HasMaxLength(Protocol):
    """A template (``swift.template.Template``): its context budget in tokens."""

    max_length: int | None


@runtime_checkable
class InferEngine(Protocol):
    """Server mode's engine (``swift.infer_engine``): it owns the template."""

    template: Any


@runtime_checkable
class HasMaxModelLen(Protocol):
    """A vLLM engine: its context budget in tokens."""

    max_model_len: int | None


@runtime_checkable
class RowRequest(Protocol):
    """A ``RolloutInferRequest`` that carries its dataset row."""

    data_dict: dict[str, Any]


@runtime_checkable
class HasUuid(Protocol):
    """A ``RolloutInferRequest``: its id."""

    uuid: str


@runtime_checkable
class HasLogprobs(Protocol):
    """A ``ChatCompletionResponseChoice`` with its token log-probabilities."""

    logprobs: dict[str, Any] | None


@runtime_checkable
class HasOutputDir(Protocol):
    """The training arguments a reward is built with."""

    output_dir: str | None


@runtime_checkable
class TrainerState(Protocol):
    """``transformers.TrainerState``: the updates done so far."""

    global_step: int


@runtime_checkable
class CompletionBudget(Protocol):
    """GRPO's training arguments: tokens each generation may take."""

    max_completion_length: int | None


class Control(Protocol):
    """``transformers.TrainerControl``."""

    should_evaluate: bool


@runtime_checkable
class Trainer(Protocol):
    """ms-swift's GRPO trainer: its control flags and the metric lists it averages at each log step."""

    control: Control
    _metrics: dict[str, dict[str, list[float]]]


@runtime_checkable
class SchedulerOwner(Protocol):
    """A GRPO trainer with a multi-turn scheduler."""

    multi_turn_scheduler: Any


class _Run:
    """Process-wide state shared by the scheduler, the reward and the callback.

    Environments are loaded once per path and shared, so the scheduler's tool executor, its cache and its
    MCP server processes serve the whole run; the trainer handle arrives from the callback.
    """

    def __init__(self) -> None:
        self.envs: dict[str, Environment] = {}
        self.trainer: Trainer | None = None
        self.tokenizer: Any = None
        self._warned_no_callback = False
        self._resolved: dict[str, str] = {}
        self._broken: dict[str, tuple[str, float]] = {}  # path -> (why, when): fail fast, retry later
        self.turn_rewards: dict[str, list[float]] = {}  # request id -> per-turn totals, for swift_credit

    def env(self, path: str | None = None, start: bool = False) -> Environment:
        """The loaded (with ``start``, started) environment of ``path``, else of ``$RLFACTORY_ENV``.

        A file that failed to load or start raises the same message again without retrying for
        ``BROKEN_RETRY_S``, so a bad per-row file costs one load, not one per sampled row.
        """
        if path is not None and not isinstance(path, str):
            raise ValueError(f"the dataset's env column must be a path string, got {type(path).__name__}")
        path = path or os.environ.get(ENV_VAR)
        if not path:
            raise ValueError(
                f"no environment: set {ENV_VAR}=path/to/env.yaml (or give the dataset an 'env' column)"
            )
        key = self._resolved.get(path)
        if key is None:  # resolve() costs syscalls, and this runs on every turn of every trajectory
            key = self._resolved[path] = str(Path(path).expanduser().resolve())
        broken = self._broken.get(key)
        if broken is not None and time.monotonic() - broken[1] < BROKEN_RETRY_S:
            raise EnvConfigError(broken[0])
        env = self.envs.get(key)
        try:
            if env is None:
                env = Environment.load(key, count_tokens=self._count_tokens())
            if start:
                env.start()
        except Exception as exc:
            self.envs.pop(key, None)
            if env is not None:
                env.close()
            why = str(exc) if isinstance(exc, EnvConfigError) else f"{key}: {type(exc).__name__}: {exc}"
            self._broken[key] = (why, time.monotonic())
            raise
        self._broken.pop(key, None)
        self.envs[key] = env
        return env

    def _count_tokens(self):
        tokenizer = self.tokenizer
        if tokenizer is None:
            return None
        return lambda text: len(tokenizer.encode(text, add_special_tokens=False))

    def keep_turn_rewards(
        self, request_ids: Sequence[str] | None, trajectories: Sequence[Trajectory]
    ) -> None:
        """Hold the per-turn reward totals of ``credit: {mode: turn}`` trajectories for the GRPO trainer.

        ms-swift passes a reward's scalars on to the advantage but nothing else, so the turn rewards wait
        here, by request id, until ``CreditGRPOTrainer`` (``adapters/swift_credit.py``) takes them with
        :meth:`take_turn_rewards`.
        """
        for request_id, trajectory in zip(request_ids or [], trajectories, strict=False):
            if trajectory.stop_reason == "error":  # scored 0 whole; its env may not even load
                continue
            if self.env(trajectory.row.get("env")).config.credit.mode == "turn":
                self.turn_rewards[request_id] = [float(r) for r in trajectory.turn_rewards.get("total", [])]

    def drain_turn_rewards(self) -> dict[str, list[float]]:
        """Every per-turn total scored since the last drain, by request id, emptying the store.

        ms-swift scores a generation's samples (with ``--dynamic_sample``, every resampling round of them)
        and then postprocesses the samples it kept, once, before it scores anything else. What that
        postprocess does not take belongs to groups dynamic sampling threw away and will never be asked
        for, so it goes too: the store holds one generation at most, not every sample ever scored.
        """
        drained, self.turn_rewards = self.turn_rewards, {}
        return drained

    def log_metrics(self, metrics: dict[str, float]) -> None:
        """Append to the trainer's metric lists (averaged and printed by ms-swift at each log step)."""
        if self.trainer is None:
            if not self._warned_no_callback:
                logger.warning(
                    "pass --callbacks %s to log tool metrics with the trainer's metrics", PLUGIN_NAME
                )
                self._warned_no_callback = True
            logger.info("rlfactory metrics: %s", {k: round(v, 4) for k, v in metrics.items()})
            return
        mode = "eval" if self.trainer.control.should_evaluate else "train"
        for key, value in metrics.items():
            self.trainer._metrics[mode][key].append(value)


RUN = _Run()


def build_trajectories(completions: list[str], kwargs: dict[str, Any], tokenizer: Any) -> list[Trajectory]:
    """Trajectories from ms-swift's batched reward kwargs.

    The scheduler's ``rollout_infos`` carry the decoded conversation and tool records; without them (a
    different scheduler) the messages are decoded here, since ms-swift passes earlier assistant turns as
    token-id lists, and the generated turns are counted from ``response_token_ids`` (flat for one turn,
    one list per turn), so assistant messages of the row's chat history are not taken for turns.
    """
    n = len(completions)
    infos = kwargs.get("rollout_infos") or [{}] * n
    all_messages = kwargs.get("messages") or [[] for _ in range(n)]
    all_ids = kwargs.get("response_token_ids") or [[] for _ in range(n)]
    columns = {k: v for k, v in kwargs.items() if k not in NOT_ROW and isinstance(v, list) and len(v) == n}
    out = []
    for i in range(n):
        row = {k: v[i] for k, v in columns.items()}
        info = (infos[i] or {}).get(INFO_KEY)
        if info:
            out.append(trajectory_from_infos(info, row))
            continue
        messages = [_decoded(m, tokenizer) for m in all_messages[i]]
        ids = all_ids[i]
        if ids:
            turns = len(ids) if isinstance(ids[0], list) else 1
        else:  # no token ids: every assistant message is taken for a turn
            turns = sum(1 for m in messages if m["role"] == "assistant")
        out.append(Trajectory(messages=messages, turns=turns, stop_reason="unknown", row=row))
    return out


def trajectory_from_infos(info: dict[str, Any], row: dict[str, Any]) -> Trajectory:
    """The trajectory the scheduler's rollout infos describe (the same one for early and final rewards)."""
    return Trajectory(
        messages=info["messages"],
        tool_calls=info["tool_calls"],
        turns=info["turns"],
        stop_reason=info["stop_reason"],
        row=row,
        error=info.get("error"),
        user_calls=info.get("user_calls") or [],
    )


def _decoded(message: dict[str, Any], tokenizer: Any) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list) and all(isinstance(x, int) for x in content):
        content = tokenizer.decode(content, skip_special_tokens=False) if tokenizer is not None else ""
    return {"role": message.get("role"), "content": content_text(content)}
