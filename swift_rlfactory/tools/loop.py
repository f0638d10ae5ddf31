"""A private event loop on a daemon thread, reachable from sync code and from other event loops.

MCP client sessions are bound to the loop that opened them, and they must live for the whole training run.
ms-swift, meanwhile, calls us from plain synchronous code (the colocate ``step()`` path) and from inside its
own running loop (the ``swift rollout`` server). Owning one loop on a thread of our own serves both:

* sync callers block on :meth:`LoopThread.run` (never from the loop thread itself);
* async callers ``await`` :meth:`LoopThread.arun`, which wraps the cross-thread future so their own loop
  keeps serving other coroutines while tools run.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """Owns an asyncio loop running forever on a daemon thread."""

    def __init__(self, name: str = "rlfactory-tools"):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

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

    def stop(self) -> None:
        """Stop the loop and join its thread."""
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
        if not self.loop.is_running() and not self.loop.is_closed():
            self.loop.close()
