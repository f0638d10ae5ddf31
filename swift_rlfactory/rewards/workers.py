"""Where user reward code runs: never on the caller's event loop, so ``timeout_s`` holds from outside.

The registry bounds each score with ``asyncio.wait_for``, and a timeout can only fire while the awaiting
loop runs. User code that does not yield would hold that loop -- the training step's -- as long as it
likes: ``time.sleep`` or a synchronous HTTP client inside ``async def``, a CPU-bound loop, a coroutine that
catches the timeout's ``CancelledError`` and carries on. So :class:`RewardWorkers` keeps a user reward term's
calls off it:

* a sync function runs in a fresh daemon thread per call;
* an async function, and the awaitable a sync function returns, runs on an event loop of the term's own, on
  a daemon thread. All calls of the term share that loop, concurrently, for the whole run, so what a reward
  keeps between calls (an HTTP client, a semaphore) stays bound to one loop, as it was within one step
  before (ms-swift runs each step's rewards in a new ``asyncio.run``). Each call is a task of its own with a
  copy of the caller's context variables, as a task of ``asyncio.gather`` would have.

The caller awaits a future that the worker settles, so giving up (the timeout, or the caller's own
cancellation) returns at once whatever the worker is doing; the task is then cancelled on its loop. A
given-up call that has not ended :data:`GRACE_S` later either blocks its loop (the cancellation never even
ran) or ignored the cancellation: the next call *retires* that loop -- it stops when it next runs and its
leftover tasks are cancelled and dropped -- and starts a fresh one, logging which of the two it was. Only
the calls on a blocked loop share its fate; the term's later calls and every other reward go on.

What a call returns is read into a score by the term's ``convert`` (``float()``, in the registry) in the
worker too, right after the function (or its awaitable) returns: a value whose ``__float__`` blocks or
raises is the reward's own slow or failed call, under the same timeout and grace, never the caller's.

Threads and retired loops still inside given-up calls are the term's ``stuck`` workers. They never hold up
exit (daemon threads, never joined) and are freed when the call returns. At ``max_stuck`` of them (default
:data:`MAX_STUCK`) the term starts no more calls: each scores its fallback at once (:class:`RewardStuck`,
recorded as ``timeout: not started ...``) until a stuck worker returns, so a reward that hangs for good
costs a bounded number of threads, not one per call per step.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

MAX_STUCK = 32
"""Workers (threads, retired loops) a term may have stuck in given-up calls before it starts no more."""
GRACE_S = 1.0
"""How long a given-up call may take to end: a running loop delivers a cancellation in milliseconds."""


class RewardStuck(TimeoutError):
    """The call was not started: the term already has ``max_stuck`` workers stuck in given-up calls."""


class _Call:
    """One call as both threads see it; the fields change under :attr:`RewardWorkers._lock`."""

    __slots__ = ("cancelled", "ended", "given_up_at", "task")

    def __init__(self) -> None:
        self.ended = False  # its function returned (or it never started)
        self.given_up_at: float | None = None  # when its caller stopped waiting
        self.cancelled = False  # the cancellation reached its loop
        self.task: asyncio.Task[Any] | None = None


class RewardWorkers:
    """Runs one user reward term's calls off the caller's event loop (see the module docstring).

    Attributes:
        name: the term's name, for the logs.
        max_stuck: stuck workers at which the term starts no more calls.
        convert: reads a call's returned value into what :meth:`call` returns, in the worker; what it
            raises is the call's error.
        stuck: daemon threads and retired loops still inside calls that were given up.
    """

    def __init__(self, name: str, max_stuck: int = MAX_STUCK, convert: Callable[[Any], Any] | None = None):
        self.name = name
        self.max_stuck = max_stuck
        self.convert = convert
        self.stuck = 0
        self._lock = threading.Lock()
        self._home: _RewardLoop | None = None
        self._loops = 0
        self._refusing = False

    async def call(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in a worker, its awaitable (if it returns one) awaited on the term's loop,
        the value then read by ``convert`` where it came from (the thread, or the loop).

        Raises :class:`RewardStuck` without starting anything when the term is at ``max_stuck``, and what
        the function raises (``SystemExit`` and ``KeyboardInterrupt`` as ``RuntimeError``: they are the
        reward's, not the run's to obey).
        """
        if is_async(fn):
            return await self._on_loop(fn(*args, **kwargs))  # a coroutine: nothing of it has run yet
        value = await self._in_thread(fn, args, kwargs)
        if inspect.isawaitable(value):
            value = await self._on_loop(value)
        return value

    def close(self) -> None:
        """Stop the term's loop (without waiting: it may be blocked); its thread ends when it can."""
        with self._lock:
            home, self._home = self._home, None
        if home is not None:
            home.stop()

    # -- sync functions: a daemon thread per call ----------------------------------------------------
    async def _in_thread(self, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
        self._admit()
        caller = asyncio.get_running_loop()
        future = caller.create_future()
        call = _Call()

        def run() -> None:
            try:
                result, exc = fn(*args, **kwargs), None
                if self.convert is not None and not inspect.isawaitable(result):
                    result = self.convert(result)
            except Exception as error:
                result, exc = None, error
            except BaseException as error:  # SystemExit, KeyboardInterrupt
                result, exc = None, RuntimeError(f"the reward raised {type(error).__name__}{error.args!r}")
            with self._lock:
                call.ended = True
                if call.given_up_at is not None:
                    self.stuck -= 1
            _relay(caller, future, result, exc)

        context = contextvars.copy_context()
        threading.Thread(
            target=context.run, args=(run,), daemon=True, name=f"rlfactory-reward-{self.name}"
        ).start()
        try:
            return await future
        except asyncio.CancelledError:
            with self._lock:
                if not call.ended:  # nothing can stop the thread: it is stuck until fn returns
                    call.given_up_at = time.monotonic()
                    self.stuck += 1
            raise

    # -- async functions: the term's own event loop --------------------------------------------------
    async def _on_loop(self, awaitable: Any) -> Any:
        """Await ``awaitable`` in a task on the term's loop."""
        try:
            home = self._loop()
        except RewardStuck:
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            raise
        caller = asyncio.get_running_loop()
        future = caller.create_future()
        call = _Call()

        def finished(task: asyncio.Task[Any]) -> None:  # on the term's loop
            with self._lock:
                call.ended = True
                home.given_up.pop(call, None)
            if task.cancelled():
                if call.given_up_at is not None:
                    return  # its caller is gone
                exc: BaseException = (
                    TimeoutError("its event loop was stopped") if home.stopping else asyncio.CancelledError()
                )  # else the reward cancelled itself: its error, as when it raises
                _relay(caller, future, None, exc)
            else:
                _relay(caller, future, None if task.exception() else task.result(), task.exception())

        def start() -> None:  # on the term's loop, in a copy of the caller's context
            with self._lock:
                if call.given_up_at is not None:  # given up before its loop got to it
                    call.ended = True
                    home.given_up.pop(call, None)
                    if inspect.iscoroutine(awaitable):
                        awaitable.close()  # never started: nothing to warn about
                    return
                call.task = home.loop.create_task(_awaited(awaitable, self.convert))
            call.task.add_done_callback(finished)

        home.loop.call_soon_threadsafe(start)
        try:
            return await future
        except asyncio.CancelledError:
            with self._lock:
                if not call.ended:
                    call.given_up_at = time.monotonic()
                    home.given_up[call] = call.given_up_at
            with contextlib.suppress(RuntimeError):  # the loop is closed: the call ended with it
                home.loop.call_soon_threadsafe(_cancel, call, self._lock)
            raise

    def _loop(self) -> _RewardLoop:
        """The term's loop; a blocked or stubborn one is retired first and a fresh one started."""
        with self._lock:
            home = self._home
            stale = home.stale() if home is not None else None
            if stale is not None:
                self._home = None
                self.stuck += 1
        if home is not None and stale is not None:
            self._log_retired(*stale)
            home.stop(retired=self)
        self._admit()
        with self._lock:
            if self._home is None:
                self._loops += 1
                self._home = _RewardLoop(f"rlfactory-reward-{self.name}-{self._loops}")
            return self._home

    def _admit(self) -> None:
        with self._lock:
            refusing, stuck = self.stuck >= self.max_stuck, self.stuck
            first = refusing and not self._refusing
            self._refusing = refusing
        if first:
            logger.warning(
                "reward %r has %d workers still stuck in calls that timed out; its calls now score the "
                "fallback without running (timeout: not started) until one of them returns",
                self.name, stuck,
            )  # fmt: skip
        if refusing:
            raise RewardStuck(f"not started, {stuck} earlier calls still stuck")

    def _log_retired(self, blocked: bool, waited: float) -> None:
        if blocked:
            logger.warning(
                "reward %r kept its event loop from running for %.1f s, past its timeout: an async reward "
                "must await, not block (time.sleep, a synchronous HTTP client or CPU-bound work inside "
                "'async def'; make it a plain 'def' to run it in a thread). Its loop is left to finish "
                "the blocking call and a fresh loop takes its next calls",
                self.name, waited,
            )  # fmt: skip
        else:
            logger.warning(
                "reward %r ignored the cancellation of a call that timed out %.1f s ago (it catches "
                "CancelledError and goes on, or its cleanup takes that long); its loop is stopped and a "
                "fresh one takes its next calls",
                self.name, waited,
            )  # fmt: skip


class _RewardLoop:
    """An event loop on a daemon thread, and the calls given up on it that have not ended yet."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.given_up: dict[_Call, float] = {}  # -> when given up
        self.stopping = False
        self._retired: RewardWorkers | None = None
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def stale(self) -> tuple[bool, float] | None:
        """``(blocked, seconds)`` when a given-up call has not ended within :data:`GRACE_S`: ``blocked``
        when its cancellation never ran (the loop is blocked), else the reward ignored it."""
        now = time.monotonic()
        late = [call for call, at in self.given_up.items() if now - at > GRACE_S]
        if not late:
            return None
        oldest = min(self.given_up[call] for call in late)
        return any(not call.cancelled for call in late), now - oldest

    def stop(self, retired: RewardWorkers | None = None) -> None:
        """Stop when the loop next runs; a ``retired`` loop counts in that term's ``stuck`` until then."""
        self._retired = retired
        self.stopping = True
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.loop.stop)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
            self.loop.set_exception_handler(_quiet)  # for the tasks dropped below
            left = asyncio.all_tasks(self.loop)
            for task in left:
                task.cancel()
            if left:  # their finally blocks may close what they hold; one that ignores it is dropped
                self.loop.run_until_complete(asyncio.wait(left, timeout=GRACE_S))
        finally:
            self.loop.close()
            if self._retired is not None:
                with self._retired._lock:
                    self._retired.stuck -= 1


def is_async(fn: Any) -> bool:
    """``fn`` is an ``async def`` function, or an object whose ``__call__`` is."""
    call = type(fn).__call__ if not inspect.isfunction(fn) and callable(fn) else None
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def yields(fn: Any) -> bool:
    """``fn`` (or its ``__call__``) is a generator function, sync or async: it could never return a score."""
    call = type(fn).__call__ if not inspect.isfunction(fn) and callable(fn) else None
    return any(inspect.isgeneratorfunction(f) or inspect.isasyncgenfunction(f) for f in (fn, call) if f)


async def _awaited(awaitable: Any, convert: Callable[[Any], Any] | None) -> Any:
    try:
        value = await awaitable
        return value if convert is None else convert(value)
    except (SystemExit, KeyboardInterrupt) as error:  # raised out of a task they would stop its loop
        raise RuntimeError(f"the reward raised {type(error).__name__}{error.args!r}") from None


def _cancel(call: _Call, lock: threading.Lock) -> None:  # on the call's loop
    with lock:
        call.cancelled = True
        task = call.task
    if task is not None:
        task.cancel()


def _relay(caller: asyncio.AbstractEventLoop, future: asyncio.Future, result: Any, exc: BaseException | None):
    """Settle the caller's ``future`` from another thread; a caller that stopped waiting is not told."""

    def settle() -> None:
        if future.done():
            return
        if exc is None:
            future.set_result(result)
        elif isinstance(exc, asyncio.CancelledError):
            future.cancel()
        elif isinstance(exc, StopIteration) or not isinstance(exc, Exception):
            # A future refuses StopIteration (it would never be settled); GeneratorExit or a library's own
            # BaseException would get past the registry's handlers: each becomes a plain error of the term.
            future.set_exception(RuntimeError(f"the reward raised {type(exc).__name__}{exc.args!r}"))
        else:
            future.set_exception(exc)

    with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody waits any more
        caller.call_soon_threadsafe(settle)


def _quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Tasks dropped with a stopped loop ("Task was destroyed but it is pending") are expected."""
    logger.debug("reward loop: %s", context.get("message"))
