"""The ``judge`` reward: a model scores trajectories through any OpenAI-compatible chat endpoint.

Judgments run on a private loop, may start as each trajectory finishes (:meth:`Judge.start`), are cached,
retried by the one chat client's rule (:mod:`swift_rlfactory.runtime.chat`) and never clamped: the YAML,
the metrics and every rule are in docs/rewards.md, "The judge". Prompt and reply formats: :mod:`.judge_text`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator

from swift_rlfactory import redaction
from swift_rlfactory.runtime.chat import RETRY_STATUS, ChatClient, ChatError, chat_url
from swift_rlfactory.runtime.json_api import content_text
from swift_rlfactory.runtime.loops import LoopThread

from ..tools.cache import ToolCache
from ..tools.limit_scope import LimitScope, rank_share
from ..trajectory import Trajectory
from . import judge_text
from .metrics import JudgeStats

logger = logging.getLogger(__name__)

DEFAULT_RUBRIC = (
    "You grade answers to questions. Question: {question}\n"
    "Reference answers: {golden_answers}\n"
    "Score 1 when the response's final answer means the same as a reference answer, 0 when it is wrong "
    "or missing, and values in between only for a partly correct answer."
)
_PENDING_LIMIT = 8192  # judgments kept for the reward to pick up; older ones are recomputed (or cached)


class JudgeError(RuntimeError):
    """No score could be had for a trajectory; the message never holds the key or the URL."""


class JudgeConfig(BaseModel):
    """The ``args`` of a ``judge`` reward term.

    Attributes:
        mode: ``pointwise`` (one request per distinct trajectory) or ``group`` (one request per GRPO group,
            the shared prompt sent once and identical trajectories shown once).
        base_url: the API root, up to ``/v1``; variables are expanded as in MCP configs
            (:func:`~swift_rlfactory.redaction.expand`: ``${VAR}``, ``${VAR:-default}``, ``${env:VAR}``,
            ``${file:PATH}``, ...), an unset one without a default failing at load naming the field.
        model: the model name the endpoint serves; expanded the same way.
        api_key: bearer token, normally ``${VAR}`` or ``${file:PATH}``; held as a secret, never logged.
        rubric: the instructions, with placeholders (see :mod:`~swift_rlfactory.rewards.judge_text`).
        max_score: the top of the rubric's scale (scores are divided by it; one outside [0, 1] is an error).
        max_concurrency: requests in flight at once, over this process (one rank); see concurrency_scope.
        concurrency_scope: who shares ``max_concurrency``: each rank alone (``rank``), the ranks of one
            node (``node``) or every rank of the run (``run``), each then holding its share
            (:func:`~swift_rlfactory.tools.limit_scope.rank_share`).
        call_timeout_s: seconds one request may take.
        retries: extra attempts after a transport error, a 429 or a 5xx.
        temperature, max_tokens: sampling of the judge's reply.
        max_chars: longest transcript shown to the judge per trajectory (the middle is cut).
        extra_body: merged into every request, e.g. ``{chat_template_kwargs: {enable_thinking: false}}``.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    mode: Literal["pointwise", "group"] = "pointwise"
    base_url: str
    model: str
    api_key: SecretStr | None = None
    rubric: str = DEFAULT_RUBRIC
    max_score: float = Field(default=1.0, gt=0)
    max_concurrency: int = Field(default=16, gt=0)
    concurrency_scope: LimitScope = "rank"
    call_timeout_s: float = Field(default=15.0, gt=0)
    retries: int = Field(default=2, ge=0)
    temperature: float = Field(default=0.0, ge=0)
    max_tokens: int = Field(default=256, gt=0)
    max_chars: int = Field(default=16_000, gt=100)
    extra_body: dict[str, Any] = Field(default_factory=dict)

    @field_validator("model", mode="before")
    @classmethod
    def _expand(cls, value: Any, info: ValidationInfo) -> Any:
        return _expanded(value, info) if isinstance(value, str) else value

    @field_validator("base_url", mode="before")
    @classmethod
    def _expand_url(cls, value: Any, info: ValidationInfo) -> Any:  # a URL may carry a key anywhere
        return _expanded(value, info, secret=True) if isinstance(value, str) else value

    @field_validator("api_key", mode="before")
    @classmethod
    def _expand_secret(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str):
            value = _expanded(value, info, secret=True)
            redaction.remember(value, "<judge api_key>")  # a literal key too (an expanded one is ${VAR})
        return value or None

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        redaction.remember_url(value, "<judge base_url credential>")  # http://user:key@host/v1?key=...
        try:  # what the HTTP client refuses or cannot connect to fails here, not in every judgment
            url = httpx.URL(value)
        except httpx.InvalidURL as exc:
            raise ValueError(str(exc)) from None
        if not url.host:
            raise ValueError("names no host (http://HOST:PORT/v1)")
        if url.port is not None and not 0 < url.port < 65536:
            raise ValueError(f"port {url.port} is out of range")
        return value.rstrip("/")


def _expanded(text: str, info: ValidationInfo, secret: bool = False) -> str:
    """``text`` with variables expanded by the rule every config follows (:func:`redaction.expand`, as in
    MCP configs; ``secret``: every value is one); a relative ``${file:...}`` is taken from the ``base_dir``
    of the validation context."""
    base_dir = (info.context or {}).get("base_dir", Path("."))
    return redaction.expand(text, base_dir=base_dir, secret=secret)


class Judge:
    """A ``judge`` reward: an async callable ``await judge(trajectory) -> float in [0, 1]``.

    Args:
        config: the validated term arguments.
        cache: the environment's cache; ``None`` gives the judge an in-memory one of its own.
    """

    def __init__(self, config: JudgeConfig, cache: ToolCache | None = None):
        self.config = config
        self.cache = cache if cache is not None else ToolCache(max_entries=10_000)
        self.stats = JudgeStats()
        self._loop: LoopThread | None = None
        self._client: ChatClient | None = None
        self._warned_range = False
        self._lock = threading.Lock()  # the scheduler's loop and the reward's loop both start judgments
        self._loop_lock = threading.Lock()
        self._pending: OrderedDict[str, concurrent.futures.Future[float]] = OrderedDict()
        self._waiters: dict[concurrent.futures.Future[float], int] = {}  # rewards awaiting each judgment
        # the cache key's prefix: everything besides the prompt that changes the reply
        settings = (config.base_url, config.model, config.temperature, config.max_tokens, config.extra_body)
        self._key_prefix = json.dumps(settings, sort_keys=True, default=str)
        self._arrived: dict[str, dict[str, Trajectory]] = {}  # group -> distinct members so far
        self._arrivals: dict[str, int] = {}  # group -> members finished so far (identical ones too)

    @classmethod
    def from_args(
        cls, args: dict[str, Any], cache: ToolCache | None = None, base_dir: Path = Path(".")
    ) -> Judge:
        """Build from a term's ``args`` (a relative ``${file:...}`` in them taken from ``base_dir``); raises
        pydantic's ``ValidationError`` naming the bad field."""
        return cls(JudgeConfig.model_validate(args, context={"base_dir": base_dir}), cache)

    # -- the reward ------------------------------------------------------------------------------
    async def __call__(self, trajectory: Trajectory) -> float:
        """The trajectory's score: awaits the judgment :meth:`start` launched, or launches it now."""
        key = self._pending_key(trajectory)
        future = self._take(key)
        if future is None:
            self.start_batch([trajectory])
            future = self._take(key)
        if future is None:  # evicted between the two lines: thousands of judgments are pending
            raise JudgeError("too many judgments pending")
        with self._lock:
            self._waiters[future] = self._waiters.get(future, 0) + 1
        try:
            # shielded: a reward timeout must not cancel a judgment that an identical trajectory also awaits
            return await asyncio.shield(asyncio.wrap_future(future))
        finally:
            # picked up: the next batch looks again (a cache hit, or a fresh try after a failure)
            with self._lock:
                left = self._waiters.pop(future) - 1
                if left:
                    self._waiters[future] = left
                if self._pending.get(key) is future:
                    del self._pending[key]
            if not left and not future.done():  # abandoned (its reward timed out): free its slot
                future.cancel()

    def start(self, trajectory: Trajectory, group_size: int | None = None) -> None:
        """Launch the judgment of a finished trajectory without waiting for it.

        Pointwise, the request goes out now. In group mode the trajectory waits for the rest of its group
        (same prompt): the group's request goes out when ``group_size`` members have arrived; without a
        size, :meth:`start_batch` sends it when the reward batch arrives.
        """
        if self.config.mode == "pointwise":
            key = self._pending_key(trajectory)
            with self._lock:
                if key not in self._pending:
                    self._remember(key, self._submit(self._pointwise(trajectory)))
            return
        group = judge_text.group_key(trajectory)
        with self._lock:
            members = self._arrived.setdefault(group, {})
            members.setdefault(judge_text.member_key(trajectory), trajectory)
            self._arrivals[group] = arrivals = self._arrivals.get(group, 0) + 1
            if group_size is None or arrivals < group_size:
                while len(self._arrived) > _PENDING_LIMIT:  # groups that were never scored
                    self._forget(next(iter(self._arrived)))
                return
            self._forget(group)
        self._launch_group(group, list(members.values()))

    def start_batch(self, trajectories: Sequence[Trajectory]) -> None:
        """Start what :meth:`start` has not: called by the reward spec with the whole reward batch."""
        if self.config.mode == "pointwise":
            for trajectory in trajectories:
                self.start(trajectory)
            return
        groups: dict[str, dict[str, Trajectory]] = {}
        for trajectory in trajectories:
            groups.setdefault(judge_text.group_key(trajectory), {})[judge_text.member_key(trajectory)] = (
                trajectory
            )
        for group, members in groups.items():
            with self._lock:
                self._forget(group)
                if all(self._member_key(group, m) in self._pending for m in members):
                    continue
            self._launch_group(group, list(members.values()))

    def drain_stats(self) -> JudgeStats:
        """The counters since the last drain (a fresh set starts)."""
        stats, self.stats = self.stats, JudgeStats()
        return stats

    def drain_metrics(self) -> dict[str, float]:
        """``judge/*`` metrics since the last drain (empty when nothing was judged)."""
        return self.drain_stats().metrics()

    def close(self) -> None:
        """Close the HTTP client and stop the private loop."""
        if self._loop is None:
            return
        if self._client is not None:
            self._loop.run(self._client.aclose())
        self._loop.stop()
        self._loop, self._client = None, None

    # -- bookkeeping -----------------------------------------------------------------------------
    def _pending_key(self, trajectory: Trajectory) -> str:
        """Pointwise: the request's cache key; in a group: the group and the member."""
        if self.config.mode == "pointwise":
            return judge_text.prompt_key(self._key_prefix, self._pointwise_messages(trajectory))
        return self._member_key(judge_text.group_key(trajectory), judge_text.member_key(trajectory))

    @staticmethod
    def _member_key(group: str, member: str) -> str:
        return f"group:{group}:{member}"

    def _take(self, key: str) -> concurrent.futures.Future[float] | None:
        with self._lock:
            return self._pending.get(key)

    def _forget(self, group: str) -> None:
        self._arrived.pop(group, None)
        self._arrivals.pop(group, None)

    def _remember(self, key: str, future: concurrent.futures.Future[float]) -> None:
        self._pending[key] = future
        self._pending.move_to_end(key)
        while len(self._pending) > _PENDING_LIMIT:
            self._pending.popitem(last=False)

    def _submit(self, coro) -> concurrent.futures.Future:
        if self._loop is None:
            with self._loop_lock:
                if self._loop is None:
                    self._loop = LoopThread(name="rlfactory-judge")
        return self._loop.submit(coro)

    def _launch_group(self, group: str, members: list[Trajectory]) -> None:
        """One request for the group's distinct members; each member gets a future of its own score."""
        members = sorted(members, key=judge_text.member_key)  # a stable order: same group, same prompt
        whole = self._submit(self._group(members))
        futures: list[concurrent.futures.Future[float]] = [concurrent.futures.Future() for _ in members]

        def settle(done: concurrent.futures.Future) -> None:
            for k, future in enumerate(futures):
                if future.done():  # its reward stopped waiting and cancelled it
                    continue
                if done.cancelled():
                    future.cancel()
                elif done.exception() is not None:
                    future.set_exception(done.exception())
                else:
                    future.set_result(done.result()[k])

        whole.add_done_callback(settle)

        def abandoned(_: concurrent.futures.Future) -> None:  # every member's reward stopped waiting
            if all(f.done() for f in futures) and not whole.done():
                whole.cancel()

        for future in futures:
            future.add_done_callback(abandoned)
        with self._lock:
            for member, future in zip(members, futures, strict=True):
                self._remember(self._member_key(group, judge_text.member_key(member)), future)

    # -- judgments (on the private loop) ---------------------------------------------------------
    def _pointwise_messages(self, trajectory: Trajectory) -> judge_text.Messages:
        return judge_text.pointwise_messages(self.config.rubric, trajectory, self.config.max_chars)

    async def _pointwise(self, trajectory: Trajectory) -> float:
        messages = self._pointwise_messages(trajectory)

        def score(reply: str) -> float:
            value = self._in_range(judge_text.parse_score, reply, self.config.max_score)
            if value is None:
                raise JudgeError(f"the judge's reply holds no score: {redaction.excerpt(reply)!r}")
            return value

        return score(await self._cached(messages, score))

    async def _group(self, members: list[Trajectory]) -> list[float]:
        messages = judge_text.group_messages(self.config.rubric, members, self.config.max_chars)

        def scores(reply: str) -> list[float]:
            values = self._in_range(judge_text.parse_group_scores, reply, len(members), self.config.max_score)
            if values is None:
                shown = redaction.excerpt(reply)
                raise JudgeError(f"the judge's reply holds no {len(members)} scores: {shown!r}")
            return values

        return [float(s) for s in scores(await self._cached(messages, scores))]

    async def _cached(self, messages: judge_text.Messages, read) -> str:
        """The judge's reply to ``messages``, from the cache or the endpoint; a reply that ``read`` cannot
        score raises and is not cached, so the next batch asks again."""

        async def judged() -> str:
            reply = await self._chat(messages)
            read(reply)
            return reply

        self.stats.lookups += 1
        try:
            value, hit = await self.cache.get_or_run(
                judge_text.prompt_key(self._key_prefix, messages), judged
            )
        except Exception as exc:
            self.stats.errors += 1
            if isinstance(exc, JudgeError):
                error = exc
            else:  # down, timed out, 429/5xx to the last retry: name the endpoint (credentials redacted)
                where = redaction.redact(self.config.base_url)
                error = JudgeError(f"no judgment from {where}: {type(exc).__name__}")
            # one warning per metrics window: a judge that is down must not flood the log
            logger.log(logging.WARNING if self.stats.errors == 1 else logging.DEBUG, "judge: %s", error)
            raise error from None
        self.stats.hits += hit
        return value

    def _in_range(self, parse: Any, reply: str, *args: Any) -> Any:
        """``parse(reply, *args)``; a score outside the rubric's scale is counted (``judge/out_of_range``),
        logged once with the rubric, and raised as :class:`JudgeError`: the term's fallback applies."""
        try:
            return parse(reply, *args)
        except judge_text.ScoreOutOfRange as exc:
            self.stats.out_of_range += 1
            if not self._warned_range:
                self._warned_range = True
                logger.warning(
                    "judge: %s; the reply is an error and the term scores its fallback (counted in "
                    "judge/out_of_range, logged once). Set max_score to the rubric's top score. Rubric: %s",
                    exc, redaction.excerpt(self.config.rubric, 500),
                )  # fmt: skip
            raise JudgeError(str(exc)) from None

    async def _chat(self, messages: judge_text.Messages) -> str:
        """One chat completion by the chat client's retry rule; returns the reply text."""
        if self._client is None:
            key = self.config.api_key
            share = rank_share(self.config.max_concurrency, self.config.concurrency_scope)
            self._client = ChatClient(
                chat_url(self.config.base_url),
                api_key=None if key is None else key.get_secret_value(),
                timeout_s=self.config.call_timeout_s,
                retries=self.config.retries,
                connections=share,
                max_in_flight=share,
                on_attempt=self._attempted,
            )
        body = {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
            **self.config.extra_body,
        }
        try:
            data = await self._client.complete(body)
        except ChatError as exc:
            raise self._failed(exc) from None
        try:
            choice = data["choices"][0]
            reply = content_text(choice["message"]["content"])
        except (KeyError, IndexError, TypeError):
            shown = redaction.excerpt(json.dumps(data, ensure_ascii=False))
            raise JudgeError(f"not a chat completion: {shown!r}") from None
        if self._client.latency_s is not None:
            self.stats.latencies.append(self._client.latency_s)
        if not reply.strip():  # a thinking judge that spent max_tokens thinking sends null content
            why = choice.get("finish_reason")
            hint = (
                f": max_tokens={self.config.max_tokens} ran out first (a thinking judge needs more, or "
                "extra_body: {chat_template_kwargs: {enable_thinking: false}})"
            )
            raise JudgeError(
                f"the reply has no text (finish_reason {why!r}){hint if why == 'length' else ''}"
            )
        return reply

    def _attempted(self) -> None:
        self.stats.calls += 1

    def _failed(self, exc: ChatError) -> JudgeError:
        """The judge's words for a completion the client could not get (never the key or the URL's path)."""
        if exc.kind == "not_json":
            return JudgeError(f"not a chat completion: {redaction.excerpt(exc.text)!r}")
        if exc.kind == "too_large":
            return JudgeError(str(exc))
        status = exc.status or 0
        if exc.kind == "status" and status < 400:
            where = redaction.redact(exc.location or "?")
            return JudgeError(f"HTTP {status}: redirected to {where}; point base_url there")
        if exc.kind == "status" and status not in RETRY_STATUS and status < 500:
            return JudgeError(f"HTTP {status}: {redaction.excerpt(exc.text)!r}")
        # down, timed out, 429/5xx to the last retry: name the endpoint (credentials redacted)
        return JudgeError(f"no judgment from {redaction.redact(self.config.base_url)}: {exc}")
