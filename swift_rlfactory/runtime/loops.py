"""A private event loop on a daemon thread, reachable from sync code and from other event loops.

Sync callers block on :meth:`LoopThread.run`; async callers await :meth:`LoopThread.arun`, so their own
loop keeps serving while the work runs here (docs/runtime.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)

DRAIN_S = 1.0
"""How long the tasks left on a stopped loop get to unwind once cancelled."""


class LoopThread:
    """Owns an asyncio loop running forever on a daemon thread.

    Stopped (:meth:`stop`), the loop cancels the tasks still on it, gives them :data:`DRAIN_S` to unwind
    (one that ignores the cancellation is dropped quietly), closes, and then calls ``on_exit``.
    """

    def __init__(self, name: str = "rlfactory-tools", on_exit: Callable[[], None] | None = None):
        self.loop = asyncio.new_event_loop()
        self.stopping = False
        self._on_exit = on_exit
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
            self.loop.set_exception_handler(_quiet)  # for the tasks dropped below
            left = asyncio.all_tasks(self.loop)
            for task in left:
                task.cancel()
            if left:  # their finally blocks may close what they hold; one that ignores it is dropped
                self.loop.run_until_complete(asyncio.wait(left, timeout=DRAIN_S))
        finally:
            self.loop.close()
            if self._on_exit is not None:
                self._on_exit()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule ``coro`` on the private loop; returns a thread-safe future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` to completion from synchronous code and return its result."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("LoopThread.run called from its own loop; await the coroutine instead")
        return self.submit(coro).result()

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` from another event loop without blocking that loop."""
        if asyncio.get_running_loop() is self.loop:
            return await coro
        return await asyncio.wrap_future(self.submit(coro))

    def stop(self, wait: bool = True) -> None:
        """Stop the loop when it next runs; with ``wait``, join its thread (up to 10 s). A loop blocked by
        the code it runs stops once that code lets it."""
        self.stopping = True
        with contextlib.suppress(RuntimeError):  # already closed
            self.loop.call_soon_threadsafe(self.loop.stop)
        if wait and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)


def _quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Tasks dropped with a stopped loop ("Task was destroyed but it is pending") are expected."""
    logger.debug("stopped loop: %s", context.get("message"))
