"""Tool-result cache: an in-memory LRU in front of an optional shared store, with coalescing of identical calls.

GRPO asks the same search or lookup again and again; caching is opt-in per tool and keyed by tool name +
canonical JSON of the arguments + a namespace (:func:`cache_key`). The store is an SQLite file on a local
disk (:mod:`.cache_sqlite`) or a Redis or Valkey server shared by many machines (:mod:`.cache_redis`). The
cache can only make a call slower, never fail it: a store that fails is counted in :attr:`ToolCache.errors`
(``tools/cache_errors``) and the call runs uncached. Semantics, bounds and failure rules: docs/cache.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from swift_rlfactory.runtime.json_api import sendable

from .cache_sqlite import SQLiteStore

logger = logging.getLogger(__name__)

Entry = tuple[str, float | None]
"""A stored observation and the Unix time it expires at (``None``: never)."""


class CacheStore(Protocol):
    """The shared level behind the memory LRU. No method raises once the store is open: a failure is
    counted in ``errors`` and answered as a miss (or an unstored result)."""

    errors: int

    def get(self, key: str, now: float) -> Entry | None:
        """The entry for ``key`` if present and not expired at ``now``; may block briefly (run in a thread)."""

    def put(self, key: str, value: str, expires: float | None) -> None:
        """Store an entry (in the background; never waits on the event loop)."""

    async def claim(self, key: str) -> Entry | None:
        """Before ``key`` is computed here: another process's result for it (waiting while that process
        computes it), or ``None``, after which this process computes it and calls :meth:`release`."""

    def release(self, key: str) -> None:
        """Let other processes compute ``key`` (after this process's :meth:`put` of it, if any)."""

    def close(self) -> None:
        """Flush pending writes and close connections."""


def cache_key(tool: str, arguments: dict[str, Any], namespace: str = "") -> str:
    """Stable key: tool name + SHA-256 of ``namespace`` and the canonical (sorted, compact) JSON of the
    arguments.

    ``namespace`` names what decides the observation besides the tool's name and arguments, so that runs
    sharing one cache file never replay each other's: which backend answers (two envs whose ``search``
    tools read different corpora) and how the observation was cut (:func:`~.executor.call_cache_key`
    says it for every executor). An empty namespace keys by name and arguments alone.
    """
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    hashed = f"{namespace}\0{canonical}" if namespace else canonical
    return f"{tool}:{hashlib.sha256(hashed.encode('utf-8', 'surrogatepass')).hexdigest()}"


class ToolCache:
    """Two-level cache of tool observations with coalescing of identical in-flight calls.

    Args:
        max_entries: most entries kept in memory.
        max_bytes: most bytes of observation text kept in memory (UTF-8).
        ttl_s: seconds an entry stays valid; ``None`` keeps entries forever.
        sqlite_path: file of the persistent store; ``None`` keeps the cache in memory only. A file that
            cannot be used (not an SQLite database, read-only, a folder, on a network file system) raises
            :class:`ValueError` here.
        redis_url: a Redis or Valkey server as the store instead (``redis://[:password@]host:port/db``),
            bounded by ``max_entries``, ``max_bytes`` and ``ttl_s`` too; a URL that can never work (bad
            syntax, refused credentials) raises :class:`ValueError` here, a server that is down does not.

    ``hits``, ``misses`` and ``errors`` (failed store operations, each of which made a call run uncached
    or left a result unstored) are running counts for metrics.
    """

    def __init__(
        self,
        max_entries: int = 10_000,
        max_bytes: int = 256 * 1024 * 1024,
        ttl_s: float | None = None,
        sqlite_path: str | Path | None = None,
        redis_url: str | None = None,
    ):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._memory: OrderedDict[str, tuple[str, float | None]] = OrderedDict()
        self._bytes = 0
        self._store = _open_store(sqlite_path, redis_url, max_entries, max_bytes, ttl_s)
        self._in_flight: dict[str, asyncio.Future[str]] = {}
        self.hits = 0
        self.misses = 0
        self._errors = 0
        self._lock = threading.Lock()  # the memory level is shared by the loop and sync callers
        self._errors_reported = 0

    @property
    def errors(self) -> int:
        """Cache failures so far (store lookups and writes, unusable values); each cost a hit, never a call."""
        return self._errors + (self._store.errors if self._store is not None else 0)

    def drain_errors(self) -> int:
        """Cache failures since the last call (the training metric ``tools/cache_errors`` of one batch)."""
        total = self.errors
        new, self._errors_reported = total - self._errors_reported, total
        return new

    def get(self, key: str) -> str | None:
        """The cached observation for ``key``, or ``None``; a store hit is promoted to memory. Never raises."""
        value = self._memory_get(key)
        if value is None and self._store is not None:
            value = self._store_get(key)
        return value

    def put(self, key: str, value: str) -> None:
        """Store a successful observation in both levels (the store write happens in the background).

        A lone UTF-16 surrogate (half an emoji, from a JSON escape) is stored as U+FFFD in both levels, so
        the text is one SQLite can hold and every process reads the same.
        """
        try:
            value = sendable(value)
            expires = None if self.ttl_s is None else time.time() + self.ttl_s
            self._remember(key, value, expires)
            if self._store is not None:
                self._store.put(key, value, expires)
        except Exception as exc:  # e.g. a value that is not text: this entry is not cached, nothing else
            self._errors += 1
            logger.warning("tool cache: could not store %s: %s: %s", key, type(exc).__name__, exc)

    async def get_or_run(self, key: str, run: Callable[[], Awaitable[str]]) -> tuple[str, bool]:
        """Return ``(observation, cache_hit)``; runs ``run`` at most once for concurrent identical keys.

        If ``run`` raises, the exception reaches every waiter and nothing is cached. If the caller that
        runs it is cancelled, one waiter takes over and runs it instead; no waiter is ever left hanging.
        """
        while True:
            cached = self._memory_get(key)
            if cached is not None:
                self.hits += 1
                return cached, True
            pending = self._in_flight.get(key)
            if pending is None:
                break
            try:
                value = await asyncio.shield(pending)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if pending.cancelled() and not (task is not None and task.cancelling()):
                    continue  # the runner was cancelled, not us: run it ourselves
                raise
            self.hits += 1
            return value, True
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            value, hit = await self._fetch(key, run)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters may be gone, that is fine
            raise
        finally:
            if self._in_flight.get(key) is future:
                del self._in_flight[key]
        future.set_result(value)
        return value, hit

    async def _fetch(self, key: str, run: Callable[[], Awaitable[str]]) -> tuple[str, bool]:
        """The store's entry for ``key``, or another process's result for it, or ``run``'s, stored."""
        store = self._store
        if store is None:
            self.misses += 1
            value = await run()
            self.put(key, value)
            return value, False
        try:
            stored = await self._astore_get(key)
            if stored is None:
                stored = self._promote(key, await store.claim(key))
            if stored is not None:
                self.hits += 1
                return stored, True
            self.misses += 1
            value = await run()
            self.put(key, value)
        finally:
            store.release(key)  # queued after the put: other processes find the value once the lock is gone
        return value, False

    @property
    def hit_rate(self) -> float:
        """Share of lookups answered without running the tool."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def close(self) -> None:
        """Flush pending writes and close the persistent store."""
        if self._store is not None:
            self._store.close()

    def __len__(self) -> int:
        return len(self._memory)

    def _memory_get(self, key: str) -> str | None:
        with self._lock:
            entry = self._memory.get(key)
            if entry is None:
                return None
            value, expires = entry
            if expires is None or expires >= time.time():
                self._memory.move_to_end(key)
                return value
            self._evict(key)
            return None

    def _store_get(self, key: str) -> str | None:
        return self._promote(key, self._store.get(key, time.time()))

    async def _astore_get(self, key: str) -> str | None:
        """A store lookup in a worker thread, so a busy wait never stalls the event loop."""
        try:
            entry = await asyncio.to_thread(self._store.get, key, time.time())
        except RuntimeError as exc:  # the loop's executor is shutting down
            self._errors += 1
            logger.debug("tool cache lookup skipped: %s", exc)
            return None
        return self._promote(key, entry)

    def _promote(self, key: str, entry: tuple[str, float | None] | None) -> str | None:
        """Keep a store hit in memory until the expiry it was stored with (not a fresh ``ttl_s``: an
        entry read just before it expires must not live on for another whole lifetime)."""
        if entry is None:
            return None
        value, expires = entry
        self._remember(key, value, expires)
        return value

    def _remember(self, key: str, value: str, expires: float | None) -> None:
        size = _size(value)
        if size > self.max_bytes:
            return
        with self._lock:
            self._evict(key)
            self._memory[key] = (value, expires)
            self._bytes += size
            while len(self._memory) > self.max_entries or self._bytes > self.max_bytes:
                self._evict(next(iter(self._memory)))

    def _evict(self, key: str) -> None:  # caller holds the lock
        entry = self._memory.pop(key, None)
        if entry is not None:
            self._bytes -= _size(entry[0])


def _size(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def _open_store(
    sqlite_path: str | Path | None,
    redis_url: str | None,
    max_entries: int,
    max_bytes: int,
    ttl_s: float | None,
) -> CacheStore | None:
    """The shared store the arguments name (at most one of them), or ``None`` for memory only."""
    if sqlite_path and redis_url:
        raise ValueError("give either an SQLite file or a Redis URL as the cache's store, not both")
    if redis_url:
        try:
            from .cache_redis import RedisStore  # the redis client is an optional extra
        except ImportError:
            raise ValueError(
                "a Redis cache needs the redis client: pip install 'swift-rlfactory[redis]'"
            ) from None
        return RedisStore(redis_url, max_entries=max_entries, max_bytes=max_bytes, ttl_s=ttl_s)
    if sqlite_path:
        return SQLiteStore(Path(sqlite_path))
    return None
