"""The one way user code runs under a deadline: sync, async or in a child process, off the caller's clock.

:class:`UserCode` runs one user callable's calls for tools and rewards alike: giving up on a call (a
timeout, a cancelled caller) returns at once, whatever the code does (docs/runtime.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from .loops import LoopThread
from .process import call_in_process
from .threads import SyncPool

logger = logging.getLogger(__name__)

MAX_STUCK = 32
"""Workers (threads, retired loops) a callable may have stuck in given-up calls before it starts no more."""
GRACE_S = 1.0
"""How long a given-up call may take to end: a running loop delivers a cancellation in milliseconds."""

Isolation = Literal["thread", "process"]


class CallStuck(TimeoutError):
    """The call was not started: the callable already has ``max_stuck`` workers stuck in given-up calls."""


class _Call:
    """One call on a loop of its own, as both threads see it; fields change under :attr:`UserCode._lock`."""

    __slots__ = ("cancelled", "ended", "given_up_at", "task")

    def __init__(self) -> None:
        self.ended = False  # its function returned (or it never started)
        self.given_up_at: float | None = None  # when its caller stopped waiting
        self.cancelled = False  # the cancellation reached its loop
        self.task: asyncio.Task[Any] | None = None


class UserCode:
    """Runs one user callable's calls, each bounded by its caller's deadline.

    * a sync function runs on a daemon thread of ``pool`` (a pool of its own by default), abandoned if
      the caller gives up while it runs;
    * an ``async`` function, and an awaitable a function returns, is awaited on the caller's loop
      (``own_loop=False``: tools, which keep state on the executor's loop) or on an event loop of its own
      on a daemon thread (``own_loop=True``: rewards), which a blocked or stubborn call retires;
    * with ``isolation="process"`` each call runs in a child interpreter that giving up kills; a result
      that is not plain data comes back as ``render`` (``module:function``) makes it in the child.

    Attributes:
        name: the callable's name, for the logs; ``kind`` says what it is (``reward``, ``tool``).
        max_stuck: stuck workers at which no more calls start (:class:`CallStuck`); ``None``: no bound.
        convert: reads a call's value (awaited) into what :meth:`call` returns, in the worker; what it
            raises is the call's error.
    """

    def __init__(
        self,
        name: str,
        *,
        kind: str = "reward",
        pool: SyncPool | None = None,
        own_loop: bool = True,
        isolation: Isolation = "thread",
        render: str | None = None,
        max_stuck: int | None = MAX_STUCK,
        convert: Callable[[Any], Any] | None = None,
    ):
        self.name = name
        self.kind = kind
        self.max_stuck = max_stuck
        self.convert = convert
        self.isolation = isolation
        self.render = render
        self._pool = pool or SyncPool(None, name=f"rlfactory-{kind}-{name}", quiet=True)
        self._own_loop = own_loop
        self._retired = 0  # retired loops still inside calls
        self._lock = threading.Lock()
        self._home: _Home | None = None
        self._loops = 0
        self._refusing = False

    @property
    def stuck(self) -> int:
        """Threads of its pool and retired loops still inside calls that were given up."""
        return self._pool.stuck + self._retired

    async def call(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` where the class docstring says, its awaitables awaited and its value
        read by ``convert``.

        Raises :class:`CallStuck` without starting anything at ``max_stuck``, and what the function raises
        (``SystemExit`` and ``KeyboardInterrupt`` as ``RuntimeError``: they are the code's, not the run's
        to obey).
        """
        if self.isolation == "process":
            return await call_in_process(fn, kwargs, self.render)
        if is_async(fn):
            return await self._awaited(fn(*args, **kwargs))  # a coroutine: nothing of it has run yet
        self._admit()
        value = await self._pool.run(self._sync, fn, args, kwargs)
        if inspect.isawaitable(value):
            value = await self._awaited(value)
        return value

    def close(self) -> None:
        """Stop the callable's loop (without waiting: it may be blocked); its thread ends when it can."""
        with self._lock:
            home, self._home = self._home, None
        if home is not None:
            home.thread.stop(wait=False)

    def _sync(self, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
        value = fn(*args, **kwargs)
        if self.convert is not None and not inspect.isawaitable(value):
            value = self.convert(value)
        return value

    async def _awaited(self, awaitable: Any) -> Any:
        if not self._own_loop:
            return await _settled(awaitable, self.convert)
        return await self._on_loop(awaitable)

    # -- async code on a loop of its own -------------------------------------------------------------
    async def _on_loop(self, awaitable: Any) -> Any:
        """Await ``awaitable`` in a task on the callable's loop."""
        try:
            home = self._loop()
        except CallStuck:
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            raise
        caller = asyncio.get_running_loop()
        future = caller.create_future()
        call = _Call()

        def finished(task: asyncio.Task[Any]) -> None:  # on the callable's loop
            with self._lock:
                call.ended = True
                home.given_up.pop(call, None)
            if task.cancelled():
                if call.given_up_at is not None:
                    return  # its caller is gone
                exc: BaseException = (
                    TimeoutError("its event loop was stopped")
                    if home.thread.stopping
                    else asyncio.CancelledError()
                )  # else the code cancelled itself: its error, as when it raises
                _relay(caller, future, None, exc)
            else:
                _relay(caller, future, None if task.exception() else task.result(), task.exception())

        def start() -> None:  # on the callable's loop, in a copy of the caller's context
            with self._lock:
                if call.given_up_at is not None:  # given up before its loop got to it
                    call.ended = True
                    home.given_up.pop(call, None)
                    if inspect.iscoroutine(awaitable):
                        awaitable.close()  # never started: nothing to warn about
                    return
                call.task = home.thread.loop.create_task(_obeying_nothing(_settled(awaitable, self.convert)))
            call.task.add_done_callback(finished)

        home.thread.loop.call_soon_threadsafe(start)
        try:
            return await future
        except asyncio.CancelledError:
            with self._lock:
                if not call.ended:
                    call.given_up_at = time.monotonic()
                    home.given_up[call] = call.given_up_at
            with contextlib.suppress(RuntimeError):  # the loop is closed: the call ended with it
                home.thread.loop.call_soon_threadsafe(_cancel, call, self._lock)
            raise

    def _loop(self) -> _Home:
        """The callable's loop; a blocked or stubborn one is retired first and a fresh one started."""
        with self._lock:
            home = self._home
            stale = home.stale() if home is not None else None
            if stale is not None:
                self._home = None
                home.retired = True
                self._retired += 1
        if home is not None and stale is not None:
            self._log_retired(*stale)
            home.thread.stop(wait=False)
        self._admit()
        with self._lock:
            if self._home is None:
                self._loops += 1
                self._home = _Home(f"rlfactory-{self.kind}-{self.name}-{self._loops}", self._loop_ended)
            return self._home

    def _loop_ended(self, home: _Home) -> None:
        with self._lock:
            if home.retired:  # it no longer counts as stuck
                self._retired -= 1

    def _admit(self) -> None:
        with self._lock:
            stuck = self.stuck
            refusing = self.max_stuck is not None and stuck >= self.max_stuck
            first = refusing and not self._refusing
            self._refusing = refusing
        if first:
            logger.warning(
                "%s %r has %d workers still stuck in calls that timed out; its calls now score the "
                "fallback without running (timeout: not started) until one of them returns",
                self.kind, self.name, stuck,
            )  # fmt: skip
        if refusing:
            raise CallStuck(f"not started, {stuck} earlier calls still stuck")

    def _log_retired(self, blocked: bool, waited: float) -> None:
        if blocked:
            logger.warning(
                "%s %r kept its event loop from running for %.1f s, past its timeout: async code "
                "must await, not block (time.sleep, a synchronous HTTP client or CPU-bound work inside "
                "'async def'; make it a plain 'def' to run it in a thread). Its loop is left to finish "
                "the blocking call and a fresh loop takes its next calls",
                self.kind, self.name, waited,
            )  # fmt: skip
        else:
            logger.warning(
                "%s %r ignored the cancellation of a call that timed out %.1f s ago (it catches "
                "CancelledError and goes on, or its cleanup takes that long); its loop is stopped and a "
                "fresh one takes its next calls",
                self.kind, self.name, waited,
            )  # fmt: skip


class _Home:
    """A callable's own loop (a :class:`LoopThread`) and the calls given up on it that have not ended."""

    def __init__(self, name: str, ended: Callable[[_Home], None]):
        self.given_up: dict[_Call, float] = {}  # -> when given up
        self.retired = False
        self.thread = LoopThread(name, on_exit=lambda: ended(self))

    def stale(self) -> tuple[bool, float] | None:
        """``(blocked, seconds)`` when a given-up call has not ended within :data:`GRACE_S`: ``blocked``
        when its cancellation never ran (the loop is blocked), else the code ignored it."""
        now = time.monotonic()
        late = [call for call, at in self.given_up.items() if now - at > GRACE_S]
        if not late:
            return None
        oldest = min(self.given_up[call] for call in late)
        return any(not call.cancelled for call in late), now - oldest


def cancelled_by_caller() -> bool:
    """Whether a :class:`asyncio.CancelledError` just caught belongs to the caller, and must propagate.

    A timeout or a caller that gave up cancels the running task, and ``cancelling()`` counts that request.
    A CancelledError while nobody cancelled the task came out of the user code itself (it cancelled a task
    of its own and awaited it): that is the code's failure, like any other error it raises. Let through, it
    would pass every ``except Exception`` boundary (CancelledError is a BaseException) and end the batch.
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def is_async(fn: Any) -> bool:
    """``fn`` is an ``async def`` function, or an object whose ``__call__`` is."""
    call = type(fn).__call__ if not inspect.isfunction(fn) and callable(fn) else None
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def yields(fn: Any) -> bool:
    """``fn`` (or its ``__call__``) is a generator function, sync or async: it could never return a value
    of its own."""
    call = type(fn).__call__ if not inspect.isfunction(fn) and callable(fn) else None
    return any(inspect.isgeneratorfunction(f) or inspect.isasyncgenfunction(f) for f in (fn, call) if f)


async def _settled(awaitable: Any, convert: Callable[[Any], Any] | None) -> Any:
    """The value ``awaitable`` ends in, awaited again while it is one (an ``async def`` that returns a
    coroutine it forgot to await), read by ``convert``; the caller's deadline bounds the chain."""
    value = await awaitable
    while inspect.isawaitable(value):
        value = await value
    return value if convert is None else convert(value)


async def _obeying_nothing(coro: Any) -> Any:
    try:
        return await coro
    except (SystemExit, KeyboardInterrupt) as error:  # raised out of a task they would stop its loop
        raise RuntimeError(f"the code raised {type(error).__name__}{error.args!r}") from None


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
            # BaseException would get past the callers' handlers: each becomes a plain error of the call.
            future.set_exception(RuntimeError(f"the code raised {type(exc).__name__}{exc.args!r}"))
        else:
            future.set_exception(exc)

    with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody waits any more
        caller.call_soon_threadsafe(settle)
