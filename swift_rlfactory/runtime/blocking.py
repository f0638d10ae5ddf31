"""Run a coroutine to completion from synchronous code, whether or not the calling thread runs a loop.

Why (a notebook cell, a coroutine calling a sync face) and how: docs/runtime.md ("Loops and blocking
callers").
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, also where an event loop already runs in this thread."""
    with Runner() as runner:
        return runner.run(coro)


class Runner:
    """:class:`asyncio.Runner` (one loop for several calls, closed at the end) that moves its loop to a
    worker thread of its own once a call finds a loop already running in the calling thread.

    Every call then goes to that one thread and loop, so what binds itself to the loop of its first request
    (vLLM's async engine) keeps working across calls. ^C while a call waits cancels its coroutine, as
    ``asyncio.Runner`` does, and re-raises ``KeyboardInterrupt`` once the coroutine has unwound.
    """

    def __init__(self) -> None:
        self._runner = asyncio.Runner()
        self._worker: concurrent.futures.ThreadPoolExecutor | None = None

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this runner's loop and return its result (or raise its exception)."""
        if self._worker is None and not _loop_running():
            return self._runner.run(coro)
        if self._worker is None:
            self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rlfactory-blocking")
        started: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []

        async def main() -> T:
            task = asyncio.current_task()
            assert task is not None  # a coroutine run by Runner.run is always a task's
            started.append((asyncio.get_running_loop(), task))
            return await coro

        # the worker thread's own context is empty: the coroutine is given the caller's
        job = main()
        done = self._worker.submit(self._runner.run, job, context=contextvars.copy_context())
        try:
            return done.result()
        except KeyboardInterrupt:
            # ^C reaches only the caller's thread: cancel the coroutine and wait for it to unwind
            if done.cancel():  # it never started
                job.close()
                coro.close()
            elif started:
                loop, task = started[0]
                loop.call_soon_threadsafe(task.cancel)
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    done.result()
            raise

    def close(self) -> None:
        """Close the loop (on the thread that ran it) and end the worker thread."""
        if self._worker is None:
            self._runner.close()
            return
        try:
            # asyncio.Runner.close unsets the event loop of the thread it runs on: it must be the worker
            self._worker.submit(self._runner.close).result()
        finally:
            self._worker.shutdown()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
