"""Worker threads for synchronous tools, where a hung call costs one thread and never the pool.

A synchronous Python function cannot be interrupted: when the executor's timeout fires, the call goes on
running in its thread. Run on ``asyncio.to_thread``, such a call keeps one of the loop's few default
workers for ever; a handful of hung calls and every later sync tool waits in the queue until it too times
out, and the interpreter can never exit, because ``concurrent.futures`` joins its workers at exit.

:class:`SyncPool` runs each call on one of its own daemon threads. When the awaiting coroutine is cancelled
(the timeout) while the function is still running, that worker is *abandoned*: it is no longer counted,
a fresh worker takes its place, and the stuck thread retires on its own if the function ever returns.
Daemon threads never hold up interpreter exit.

The pool must be as wide as the calls that may run at once: a call waiting in its queue is already on the
executor's clock, so with a narrow pool a burst of slow calls times out without ever having run. A started
:class:`~.executor.ToolExecutor` therefore reserves ``max_concurrency`` threads (:meth:`SyncPool.reserve`;
each of its running calls holds a global slot, so it never has more in flight) and releases them on close.
Threads are started only when calls need them, so a wide reservation costs nothing until it is used.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)


class _Worker:
    """One daemon thread of the pool; ``abandoned`` once a call it runs has timed out."""

    def __init__(self, pool: SyncPool, number: int):
        self.pool = pool
        self.abandoned = False
        self.thread = threading.Thread(target=self._serve, name=f"rlfactory-sync-tool-{number}", daemon=True)

    def _serve(self) -> None:
        pool = self.pool
        while True:
            job = pool._queue.get()
            with pool._lock:
                if not job.future.set_running_or_notify_cancel():
                    continue  # the caller gave up before the call started
                job.worker = self
            try:
                result = job.fn()
            except Exception as exc:
                job.future.set_exception(exc)
            except BaseException as exc:  # SystemExit (argparse), KeyboardInterrupt: re-raised on the event
                # loop they would stop it for good, and every later call with it
                job.future.set_exception(RuntimeError(f"{type(exc).__name__}: {exc}"))
            else:
                job.future.set_result(result)
            with pool._lock:
                job.worker = None
                if self.abandoned:  # a replacement already serves the queue
                    pool.stuck -= 1
                    return
            pool._idle.release()


class _Job:
    __slots__ = ("fn", "future", "worker")

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn
        self.future: Future[Any] = Future()
        self.worker: _Worker | None = None


class SyncPool:
    """At most ``max_workers`` threads serving calls; a thread stuck in a timed-out call is replaced.

    ``max_workers`` starts at the given base (for calls made outside any executor) and grows by every
    :meth:`reserve`. ``stuck`` counts abandoned threads that are still inside their call (each holds
    whatever the hung function holds; nothing can free it short of the function returning).
    """

    def __init__(self, max_workers: int = 32):
        self.max_workers = max_workers
        self.stuck = 0
        self._queue: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = threading.Semaphore(0)
        self._live = 0
        self._spawned = 0

    def reserve(self, workers: int) -> None:
        """Allow ``workers`` more threads, for a caller that may have that many calls in flight at once."""
        with self._lock:
            self.max_workers += workers

    def release(self, workers: int) -> None:
        """Give back a :meth:`reserve`; threads already started stay, idle, to serve later calls."""
        with self._lock:
            self.max_workers -= workers

    async def run(self, fn: Callable[..., T], /, **kwargs: Any) -> T:
        """Run ``fn(**kwargs)`` on a worker (with the caller's context variables) and await its result."""
        job = _Job(functools.partial(contextvars.copy_context().run, fn, **kwargs))
        self._queue.put(job)
        if not self._idle.acquire(blocking=False):
            with self._lock:
                if self._live < self.max_workers:
                    self._spawn()
        try:
            return await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:
            self._abandon(job, getattr(fn, "__name__", repr(fn)))
            raise

    def _abandon(self, job: _Job, name: str) -> None:
        with self._lock:
            if job.future.cancel():
                return  # still queued: the worker that picks it up will skip it
            worker = job.worker
            if worker is None or worker.abandoned:
                return  # it finished meanwhile
            worker.abandoned = True
            self._live -= 1
            self.stuck += 1
            self._spawn()
            stuck = self.stuck
        logger.warning(
            "sync tool %s is still running after its call was given up; its thread is abandoned and "
            "replaced (%d abandoned threads still running)",
            name,
            stuck,
        )

    def _spawn(self) -> None:  # caller holds the lock
        self._spawned += 1
        self._live += 1
        _Worker(self, self._spawned).thread.start()


SYNC_POOL = SyncPool()
"""The pool every synchronous :class:`~.python_tool.PythonTool` runs on."""
