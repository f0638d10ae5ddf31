"""The tool executor: every tool call of every trajectory in a batch, concurrently and safely.

Its limits (concurrency, timeout, retries, output, cache) and its error boundary: docs/tools.md
("The executor").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from swift_rlfactory.redaction import redact_recorded
from swift_rlfactory.runtime.loops import LoopThread
from swift_rlfactory.runtime.threads import SYNC_POOL

from .base import Tool, ToolError, ToolProvider, TransportError, current_call, stray_cancellation
from .cache import ToolCache, cache_key
from .calls import ToolCall
from .episode_state import NO_EPISODE, current_episode, current_state, per_episode
from .media import ToolImage
from .observation import CUT_RULE, cut, error_text, measure, render_bounded
from .toolset import ToolSet

logger = logging.getLogger(__name__)
T = TypeVar("T")

_OFF_LOOP_CHARS = 16_384
"""Results longer than this are cut by the tokenizer in a worker thread, so other calls keep flowing."""
_ERROR_CHARS = 4096
"""Longest ``ToolRecord.error`` kept (the observation is cut to the token budget as usual)."""
RETRY_WAIT_MAX_S = 5.0
"""Longest wait between two attempts of a call (exponential back-off from ``limits.retry_backoff_s``)."""
CANCEL_GRACE_S = 1.0
"""How long a call that timed out (or whose caller gave up) gets to end after it is cancelled; a tool that
swallows the cancellation is abandoned after this, so no call holds its slots longer than timeout + grace."""


@dataclass
class Limits:
    """Concurrency, time and size limits of tool execution (the ``limits`` block of an environment)."""

    call_timeout_s: float = 30.0
    max_concurrency: int = 256
    per_tool_concurrency: dict[str, int] = field(default_factory=dict)
    max_output_tokens: int | None = 1024
    retries: int = 2
    retry_backoff_s: float = 0.2
    max_description_chars: int | None = 4096
    """Longest tool description (and description in a parameter schema) shown to the model; longer ones are
    cut with a note (:func:`~.toolset.capped_spec`). ``None``: no cap."""


@dataclass
class ToolRecord:
    """What happened to one tool call: the input, the observation the model sees, and how it went."""

    tool: str
    arguments: dict[str, Any]
    observation: str
    error: str | None = None
    error_kind: str | None = None
    """Why a call did not run: ``"parse"`` (the model wrote it wrong) or ``"limit"`` (past
    ``limits.max_calls_per_turn``); ``None`` when it ran (then ``error`` is the tool's own failure)."""
    latency_s: float = 0.0
    cache_hit: bool = False
    attempts: int = 0
    repeated: bool = False
    result_chars: int = 0
    """Characters of the tool's result as text, before truncation (a lower bound when the result was too
    large to render whole)."""
    truncated_chars: int = 0
    """Characters cut from the result to fit ``max_output_tokens``; 0 when the model saw all of it."""
    images: list[ToolImage] = field(default_factory=list, repr=False)
    """The images of the result, in order, each read as its note in ``observation`` (docs/tools.md, "Images
    from tools"); not in :meth:`to_dict`."""

    @property
    def ok(self) -> bool:
        """True when the tool ran and answered without error."""
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form, for ``rollout_infos`` and trajectory logs (the images left out)."""
        return {k: v for k, v in asdict(self).items() if k != "images"}


def call_cache_key(
    name: str, arguments: dict[str, Any], limits: Limits, namespace: str = "", exact: bool = False
) -> str:
    """The key an executor with ``limits`` and ``cache_namespace`` stores a call's observation under: the
    tool's name and arguments, what the tools are (``namespace``) and how the stored text was cut: to
    ``limits.max_output_tokens``, counted by a tokenizer (``exact``) or at four characters a token, by the
    rule of :data:`~.observation.CUT_RULE`."""
    cut = f"max_output_tokens={limits.max_output_tokens},{'tokenizer' if exact else 'chars'},{CUT_RULE}"
    return cache_key(name, arguments, f"{namespace}|{cut}")


class ExecutorClosed(RuntimeError):
    """The executor was closed while the caller's calls ran; they were cancelled."""


class _CallFailed(Exception):
    """Internal: a call ended in an error observation (kept out of the cache)."""


class _WithImages(Exception):
    """Internal: a result with images, kept out of the cache (it stores text: a replay would lose them)."""

    def __init__(self, observation: str, images: list[ToolImage]):
        super().__init__("a result with images")
        self.observation, self.images = observation, images


class ToolExecutor:
    """Runs tool calls concurrently under :class:`Limits`, with optional caching.

    Args:
        providers: where tools come from (Python functions, MCP servers).
        limits: concurrency, timeout, retry and output limits.
        cache: the shared cache, or ``None`` to cache nothing.
        cached_tools: names of tools whose results may be cached (``None`` with a cache: all tools).
        count_tokens: tokenizer-backed counter for exact output truncation (else ~4 characters per token).
        cache_namespace: what these tools are, for the cache's keys (an environment gives a digest of its
            tools' configuration): executors that share a cache file replay each other's results only for
            the same tools. The keys also hold ``limits.max_output_tokens``, since an observation is
            stored cut to it.
    """

    def __init__(
        self,
        providers: Sequence[ToolProvider],
        limits: Limits | None = None,
        cache: ToolCache | None = None,
        cached_tools: set[str] | None = None,
        count_tokens: Callable[[str], int] | None = None,
        cache_namespace: str = "",
    ):
        self.limits = limits or Limits()
        self.cache = cache
        self.cached_tools = cached_tools
        self.count_tokens = count_tokens
        self.cache_namespace = cache_namespace
        self.toolset = ToolSet(providers, self.limits.max_description_chars)
        self._loop = LoopThread()
        self._started = False
        self._start_lock = asyncio.Lock()
        """Serializes starts on the private loop: concurrent first calls must start the providers once."""
        self._global: asyncio.Semaphore | None = None
        self._per_tool: dict[str, asyncio.Semaphore] = {}
        self._abandoned: set[asyncio.Task[Any]] = set()
        """Calls given up while still running, referenced here so they are not collected mid-flight."""
        self._batches: set[asyncio.Task[Any]] = set()
        """Batches running on the private loop, which :meth:`close` ends before it stops the loop."""
        self._closing = False

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> ToolExecutor:
        """Start every provider (spawn servers, connect); idempotent. Raises if a provider cannot start."""
        if not self._started:
            self._loop.run(self._start())
        return self

    async def _start(self) -> None:
        async with self._start_lock:
            if self._started:  # another first call started it while this one waited
                return
            await self.toolset.start()
            self._global = asyncio.Semaphore(self.limits.max_concurrency)
            self._per_tool = {
                name: asyncio.Semaphore(limit) for name, limit in self.limits.per_tool_concurrency.items()
            }
            SYNC_POOL.reserve(self.limits.max_concurrency)  # a thread for every sync call holding a slot
            self._started = True

    def close(self) -> None:
        """End the calls still running (their callers get :class:`ExecutorClosed`), close providers and
        the cache, then stop the private loop."""
        if self._started:
            self._loop.run(self._close())
            SYNC_POOL.release(self.limits.max_concurrency)
            self._started = False
        if self.cache is not None:
            self.cache.close()
        self._loop.stop()

    async def _close(self) -> None:
        """Cancel every running batch and abandoned call and wait for them, then close the providers.

        Stopping the loop under them would leave their callers waiting forever and the tasks pending, to be
        destroyed (and logged by asyncio as "destroyed but it is pending") when collected. A batch ends
        within :data:`CANCEL_GRACE_S` of its cancellation (its calls are stopped as after a timeout); a
        tool that ignored the cancellation of its call before is asked once more and, still running after
        the grace, is dropped with a warning naming it.
        """
        self._closing = True
        running = [*self._batches, *self._abandoned]
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running, timeout=2 * CANCEL_GRACE_S)
        for task in [task for task in self._abandoned if not task.done()]:
            logger.warning(
                "tool %r: a call is still running when the executor closed, ignoring its cancellation; dropped",
                task.get_name(),
            )
            task._log_destroy_pending = False  # said above; asyncio's own line would only repeat it
        await self.toolset.close()

    def __enter__(self) -> ToolExecutor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def tools(self) -> dict[str, Tool]:
        """Public tool name → tool, after clash renaming."""
        return self.toolset.tools

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI function schemas of every tool, as given to the chat template."""
        return [t.spec.openai_schema() for t in self.tools.values()]

    # -- entry points ----------------------------------------------------------------------------
    def execute_batch(self, batch: Sequence[Sequence[ToolCall]]) -> list[list[ToolRecord]]:
        """Run the calls of many trajectories at once from synchronous code; results keep the shape."""
        self.start()
        return self._loop.run(self._execute_batch(batch))

    def execute(self, calls: Sequence[ToolCall]) -> list[ToolRecord]:
        """Run one trajectory's calls from synchronous code."""
        return self.execute_batch([calls])[0]

    async def aexecute(
        self, calls: Sequence[ToolCall], state: Any = NO_EPISODE, episode: str | None = None
    ) -> list[ToolRecord]:
        """Run one trajectory's calls from inside any event loop without blocking it; tools that ask for
        the episode's state receive ``state``, and per-trajectory servers key their sessions by ``episode``
        (the trajectory's id; see :mod:`.episode_state`)."""
        if not self._started:
            await self._loop.arun(self._start())
        return (await self._loop.arun(self._execute_batch([calls], state, episode)))[0]

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the loop the tools run on, so what it makes (an episode's state) lives beside them."""
        return await self._loop.arun(coro)

    async def _execute_batch(
        self, batch: Sequence[Sequence[ToolCall]], state: Any = NO_EPISODE, episode: str | None = None
    ) -> list[list[ToolRecord]]:
        current_state.set(state)  # this batch's own task: its calls' tasks copy the context
        current_episode.set(episode)
        flat = [call for calls in batch for call in calls]
        task = asyncio.current_task()
        assert task is not None
        self._batches.add(task)
        try:
            records = await asyncio.gather(*(self._execute_one(call) for call in flat))
        except asyncio.CancelledError:
            if self._closing:  # our close(), not the caller, ended it: say so rather than hang or cancel
                raise ExecutorClosed("the tool executor was closed while these calls ran") from None
            raise
        finally:
            self._batches.discard(task)
        out: list[list[ToolRecord]] = []
        i = 0
        for calls in batch:
            out.append(list(records[i : i + len(calls)]))
            i += len(calls)
        return out

    # -- one call --------------------------------------------------------------------------------
    async def _execute_one(self, call: ToolCall) -> ToolRecord:
        start = time.perf_counter()
        record = ToolRecord(tool=call.name, arguments=call.arguments, observation="")
        try:
            await self._run_call(call, record)
        except _CallFailed as exc:
            self._failed(record, str(exc))
        except Exception as exc:  # a bug anywhere in a call costs that call, never the batch
            logger.warning("tool call %r failed inside the executor", call.name, exc_info=True)
            self._failed(record, f"internal error running tool {call.name!r}: {_describe(exc)}")
        record.latency_s = time.perf_counter() - start
        return record

    async def _run_call(self, call: ToolCall, record: ToolRecord) -> None:
        if call.error is not None:
            record.error_kind = call.error_kind
            if call.error_kind == "limit":
                raise _CallFailed(f"not run: {call.error}")
            raise _CallFailed(f"could not parse tool call: {call.error}")
        tool = self.tools.get(call.name) or await self.toolset.late_tool(call.name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            raise _CallFailed(f"unknown tool {call.name!r}; available tools: {known}")

        async def run() -> str:
            observation = await self._run_limited(tool, call.arguments, record)
            if record.images:
                raise _WithImages(observation, record.images)
            return observation

        stateful = per_episode(tool)  # its result depends on the episode: never cached
        cached = self.cached_tools is None or call.name in self.cached_tools
        try:
            if self.cache is None or stateful or not cached:
                record.observation = await run()
                return
            exact = self.count_tokens is not None
            key = call_cache_key(call.name, call.arguments, self.limits, self.cache_namespace, exact=exact)
            record.observation, record.cache_hit = await self.cache.get_or_run(key, run)
        except _WithImages as result:
            record.observation, record.images = result.observation, result.images
        if record.cache_hit:  # the stored text is already cut; its marker says by how much
            record.result_chars, record.truncated_chars = measure(record.observation)

    async def _run_limited(self, tool: Tool, arguments: dict[str, Any], record: ToolRecord) -> str:
        per_tool = self._per_tool.get(tool.spec.name)
        if per_tool is not None:
            async with per_tool, self._global:
                result = await self._run_with_retries(tool, arguments, record)
        else:
            async with self._global:
                result = await self._run_with_retries(tool, arguments, record)
        return await self._observe(tool.spec.name, result, record)

    async def _run_with_retries(self, tool: Tool, arguments: dict[str, Any], record: ToolRecord) -> Any:
        name, timeout = tool.spec.name, self._timeout(tool)
        try:
            try:
                result = await self._attempt(tool, arguments, record, timeout)
            except TransportError as failure:
                if self.limits.retries == 0:
                    raise
                reached = failure.delivered  # a try so far may have run the tool: the next one repeats it
                # Only a failed first attempt pays for the retry machinery: the happy path stays cheap.
                async for attempt in AsyncRetrying(
                    retry=retry_if_exception_type(TransportError),
                    stop=stop_after_attempt(self.limits.retries),
                    wait=wait_exponential(multiplier=self.limits.retry_backoff_s, max=RETRY_WAIT_MAX_S),
                    reraise=True,
                ):
                    with attempt:
                        # A repeat is a try that may have run after one that may have run: a try that
                        # never reached the tool (its server is down) repeats nothing, whatever came before.
                        delivered = True
                        try:
                            result = await self._attempt(tool, arguments, record, timeout)
                        except TransportError as again:
                            delivered = again.delivered
                            raise
                        finally:
                            record.repeated = record.repeated or (reached and delivered)
                            reached = reached or delivered
        except TimeoutError:
            raise _CallFailed(f"tool {name!r} timed out after {timeout:g} s") from None
        except ToolError as exc:
            raise _CallFailed(f"tool {name!r} failed: {_describe(exc)}") from None
        except TransportError as exc:
            raise _CallFailed(
                f"tool {name!r} unreachable after {record.attempts} attempts: {_describe(exc)}"
            ) from None
        except Exception as exc:  # a backend bug must not kill a training run
            raise _CallFailed(f"tool {name!r} raised {type(exc).__name__}: {_describe(exc)}") from None
        return result

    def _timeout(self, tool: Tool) -> float:
        own = getattr(tool, "timeout_s", None)
        return self.limits.call_timeout_s if own is None else own

    def call_bound_s(self, name: str) -> float:
        """The longest one call of tool ``name`` takes once it holds its slots: every attempt's timeout (the
        tool's own, e.g. an MCP server's ``timeout``, else ``limits.call_timeout_s``) with its cancellation
        grace, and the waits between attempts. A watchdog above the executor must allow at least this much."""
        tool = self.tools.get(name) or self.toolset.late.get(name)
        timeout = self.limits.call_timeout_s if tool is None else self._timeout(tool)
        attempts = self.limits.retries + 1
        return attempts * (timeout + CANCEL_GRACE_S) + self.limits.retries * RETRY_WAIT_MAX_S

    async def _attempt(
        self, tool: Tool, arguments: dict[str, Any], record: ToolRecord, timeout: float
    ) -> Any:
        """One try of the call, bounded by ``timeout`` even when the tool ignores being cancelled.

        The tool runs as a task of its own, with :data:`current_call` set in its context. At the timeout, or
        when the caller gives up, the task is cancelled and gets :data:`CANCEL_GRACE_S` to clean up (an
        isolated tool reaps its child); a tool still running then is abandoned: this call ends anyway, its
        concurrency slots go to the next call, and whatever it returns later is discarded.
        """
        record.attempts += 1
        token = current_call.set(record)
        try:
            task = asyncio.create_task(tool.call(arguments), name=tool.spec.name)
        finally:
            current_call.reset(token)
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout)
        except asyncio.CancelledError:  # the caller gave up: stop the tool, then let the cancellation on
            await self._stop(task, tool.spec.name)
            raise
        if not done:
            await self._stop(task, tool.spec.name)
            raise TimeoutError
        if task.cancelled():  # nobody cancelled it: the tool raised CancelledError itself
            raise stray_cancellation(tool.spec.name)
        failure = task.exception()
        if failure is not None and not isinstance(failure, Exception):  # GeneratorExit, a library's own
            raise ToolError(f"{type(failure).__name__}: {_describe(failure)}")  # would end the whole batch
        return task.result()

    async def _stop(self, task: asyncio.Task[Any], name: str) -> None:
        """Cancel a call's task and wait a short grace for it to end; past that, abandon it."""
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
        if task.done():
            if not task.cancelled():
                task.exception()  # retrieved, so asyncio does not log it as never retrieved
            return
        logger.warning(
            "tool %r ignored the cancellation of its call for %g s; abandoned (its slots are freed and a "
            "late result is discarded)",
            name,
            CANCEL_GRACE_S,
        )
        self._abandoned.add(task)
        task.add_done_callback(self._discard_late)

    def _discard_late(self, task: asyncio.Task[Any]) -> None:
        self._abandoned.discard(task)
        if not task.cancelled() and task.exception() is None:
            logger.info("an abandoned tool call finished late; its result is discarded")

    async def _observe(self, name: str, result: Any, record: ToolRecord) -> str:
        """Render and cut ``result`` to the observation the model reads (and the cache stores).

        Recorded secrets are replaced (:func:`~swift_rlfactory.redaction.redact_recorded`) before the cut,
        as in an error: a server that echoes its ``env:`` (a ``get-env`` tool, a debug dump) would show the
        model the key its config named as ``${VAR}``. The trajectory log applies the same replacement, so
        the log and the model read the same text."""
        max_tokens = self.limits.max_output_tokens
        budget = None if not max_tokens or max_tokens <= 0 else max(64 * max_tokens, 65_536)
        images: list[ToolImage] = []
        try:
            text, unrendered = render_bounded(result, budget, images)
        except Exception as exc:
            raise _CallFailed(
                f"tool {name!r} returned a result that cannot be shown as text: {type(exc).__name__}: "
                f"{_describe(exc)}"
            ) from None
        text = redact_recorded(text)
        record.result_chars = len(text) + (unrendered or 0)
        observation, record.truncated_chars = await self._cut(text, unrendered)
        record.images = images
        return observation

    async def _cut(self, text: str, unrendered: int | None = 0) -> tuple[str, int]:
        max_tokens, count = self.limits.max_output_tokens, self.count_tokens
        if count is None or not max_tokens:
            return cut(text, max_tokens, None, unrendered)
        try:
            if len(text) > _OFF_LOOP_CHARS:
                return await asyncio.to_thread(cut, text, max_tokens, count, unrendered)
            return cut(text, max_tokens, count, unrendered)
        except Exception as exc:  # a tokenizer that rejects the text: cut by characters instead
            logger.warning("count_tokens failed (%s: %s); cutting by characters", type(exc).__name__, exc)
            return cut(text, max_tokens, None, unrendered)

    def _failed(self, record: ToolRecord, message: str) -> None:
        """Make ``record`` an error record, cut like any observation; this step cannot fail in turn.

        Recorded secrets are replaced first: an HTTP client's error often echoes the key it sent. Nothing
        else is changed: a URL's query values in the error are what the model asked for."""
        message = redact_recorded(error_text(message))
        record.error = message if len(message) <= _ERROR_CHARS else f"{message[:_ERROR_CHARS]} ..."
        max_tokens = self.limits.max_output_tokens
        text, unrendered = render_bounded(f"Error: {message}", max(64 * (max_tokens or 0), _ERROR_CHARS))
        try:
            record.observation, _ = cut(text, max_tokens, self.count_tokens, unrendered)
        except Exception:  # the tokenizer rejected it: cut by characters
            record.observation, _ = cut(text, max_tokens, None, unrendered)


def _describe(exc: BaseException) -> str:
    """``str(exc)``, even for an exception whose ``__str__`` raises."""
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__name__} that cannot be printed>"
