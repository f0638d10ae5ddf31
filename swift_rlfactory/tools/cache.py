"""Tool-result cache: an in-memory LRU in front of an optional SQLite store, with in-flight coalescing.

GRPO samples many completions of the same prompt, so the same search query or the same lookup is asked
for again and again within a step and across epochs. Caching is opt-in per tool (a tool with side effects
must not be cached) and keyed by tool name + canonical JSON of the arguments, so ``{"a":1,"b":2}`` and
``{"b": 2, "a": 1}`` hit the same entry.

* The LRU is bounded both by entry count and by total bytes of cached text.
* The SQLite store survives restarts and is shared by every process of a multi-GPU run: WAL journaling
  lets readers run beside one writer, and a busy timeout makes concurrent writers wait instead of fail.
* Entries expire after ``ttl_s`` seconds in both layers.
* Concurrent identical calls are coalesced: the first runs, the rest await its result.
* Only successful results are stored; an error is never cached, so a transient failure is retried next time.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any


def cache_key(tool: str, arguments: dict[str, Any]) -> str:
    """Stable key: tool name + SHA-256 of the canonical (sorted, compact) JSON of the arguments."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return f"{tool}:{hashlib.sha256(canonical.encode()).hexdigest()}"


class _SQLiteStore:
    """Persistent key → text store, safe to share between processes."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS tool_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL, expires REAL)"
        )

    def get(self, key: str, now: float) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT value, expires FROM tool_cache WHERE key = ?", (key,)).fetchone()
        if row is None or (row[1] is not None and row[1] < now):
            return None
        return row[0]

    def put(self, key: str, value: str, expires: float | None) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO tool_cache (key, value, expires) VALUES (?, ?, ?)",
                (key, value, expires),
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class ToolCache:
    """Two-level cache of tool observations with coalescing of identical in-flight calls.

    Args:
        max_entries: most entries kept in memory.
        max_bytes: most bytes of observation text kept in memory (UTF-8).
        ttl_s: seconds an entry stays valid; ``None`` keeps entries forever.
        sqlite_path: file of the persistent store; ``None`` keeps the cache in memory only.
    """

    def __init__(
        self,
        max_entries: int = 10_000,
        max_bytes: int = 256 * 1024 * 1024,
        ttl_s: float | None = None,
        sqlite_path: str | Path | None = None,
    ):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._memory: OrderedDict[str, tuple[str, float | None]] = OrderedDict()
        self._bytes = 0
        self._store = _SQLiteStore(Path(sqlite_path)) if sqlite_path else None
        self._in_flight: dict[str, asyncio.Future[str]] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> str | None:
        """The cached observation for ``key``, or ``None``; a store hit is promoted to memory."""
        now = time.time()
        entry = self._memory.get(key)
        if entry is not None:
            value, expires = entry
            if expires is None or expires >= now:
                self._memory.move_to_end(key)
                return value
            self._evict(key)
        if self._store is not None:
            value = self._store.get(key, now)
            if value is not None:
                self._remember(key, value, None if self.ttl_s is None else now + self.ttl_s)
                return value
        return None

    def put(self, key: str, value: str) -> None:
        """Store a successful observation in both levels."""
        expires = None if self.ttl_s is None else time.time() + self.ttl_s
        self._remember(key, value, expires)
        if self._store is not None:
            self._store.put(key, value, expires)

    async def get_or_run(self, key: str, run: Callable[[], Awaitable[str]]) -> tuple[str, bool]:
        """Return ``(observation, cache_hit)``; runs ``run`` at most once for concurrent identical keys.

        If ``run`` raises, the exception reaches every waiter and nothing is cached.
        """
        cached = self.get(key)
        if cached is not None:
            self.hits += 1
            return cached, True
        pending = self._in_flight.get(key)
        if pending is not None:
            value = await asyncio.shield(pending)
            self.hits += 1
            return value, True
        self.misses += 1
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            value = await run()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters may be gone, that is fine
            raise
        else:
            self.put(key, value)
            future.set_result(value)
            return value, False
        finally:
            del self._in_flight[key]

    @property
    def hit_rate(self) -> float:
        """Share of lookups answered without running the tool."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def close(self) -> None:
        """Close the persistent store."""
        if self._store is not None:
            self._store.close()

    def __len__(self) -> int:
        return len(self._memory)

    def _remember(self, key: str, value: str, expires: float | None) -> None:
        size = len(value.encode())
        if size > self.max_bytes:
            return
        self._evict(key)
        self._memory[key] = (value, expires)
        self._bytes += size
        while len(self._memory) > self.max_entries or self._bytes > self.max_bytes:
            self._evict(next(iter(self._memory)))

    def _evict(self, key: str) -> None:
        entry = self._memory.pop(key, None)
        if entry is not None:
            self._bytes -= len(entry[0].encode())
