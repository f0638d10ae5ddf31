"""Daemon worker threads for synchronous user code, where a hung call costs one thread and never the pool.

A thread stuck in a given-up call is abandoned and replaced (docs/runtime.md).
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
        self.thread = threading.Thread(target=self._serve, name=f"{pool.name}-{number}", daemon=True)

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
            except StopIteration as exc:  # a future refuses it: the awaiting side would never be woken
                job.future.set_exception(RuntimeError(f"{type(exc).__name__}{exc.args!r}"))
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
    """At most ``max_workers`` threads serving calls (``None``: a thread for every call that finds none
    idle); a thread stuck in a given-up call is abandoned and, in a bounded pool, replaced.

    ``max_workers`` starts at the given base (for calls made outside any executor) and grows by every
    :meth:`reserve`. ``stuck`` counts abandoned threads that are still inside their call (each holds
    whatever the hung function holds; nothing can free it short of the function returning). ``name``
    prefixes the threads' names and, unless ``quiet``, a warning names each abandoned call.
    """

    def __init__(self, max_workers: int | None = 32, name: str = "rlfactory-sync-tool", quiet: bool = False):
        self.max_workers = max_workers
        self.name = name
        self.quiet = quiet
        self.stuck = 0
        self._queue: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = threading.Semaphore(0)
        self._live = 0
        self._spawned = 0

    def reserve(self, workers: int) -> None:
        """Allow ``workers`` more threads, for a caller that may have that many calls in flight at once."""
        with self._lock:
            if self.max_workers is not None:
                self.max_workers += workers

    def release(self, workers: int) -> None:
        """Give back a :meth:`reserve`; threads already started stay, idle, to serve later calls."""
        with self._lock:
            if self.max_workers is not None:
                self.max_workers -= workers

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` on a worker (with the caller's context variables) and await its
        result. ``SystemExit`` and ``KeyboardInterrupt`` come back as ``RuntimeError``."""
        job = _Job(functools.partial(contextvars.copy_context().run, fn, *args, **kwargs))
        self._queue.put(job)
        if not self._idle.acquire(blocking=False):
            with self._lock:
                if self.max_workers is None or self._live < self.max_workers:
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
            if self.max_workers is not None:  # a bounded pool keeps its width; else the next call spawns
                self._spawn()
            stuck = self.stuck
        if not self.quiet:
            logger.warning(
                "sync call %s is still running after it was given up; its thread is abandoned "
                "(%d abandoned threads still running)",
                name,
                stuck,
            )

    def _spawn(self) -> None:  # caller holds the lock
        self._spawned += 1
        self._live += 1
        _Worker(self, self._spawned).thread.start()


SYNC_POOL = SyncPool()
"""The pool every synchronous Python tool runs on; a reward term has a pool of its own."""
