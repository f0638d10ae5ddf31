"""Tool-result cache: an in-memory LRU in front of an optional SQLite store, with in-flight coalescing.

GRPO samples many completions of the same prompt, so the same search query or the same lookup is asked
for again and again within a step and across epochs. Caching is opt-in per tool (a tool with side effects
must not be cached) and keyed by tool name + canonical JSON of the arguments, so ``{"a":1,"b":2}`` and
``{"b": 2, "a": 1}`` hit the same entry, + a namespace naming the backend and output budget (see
:func:`cache_key`).

* The LRU is bounded both by entry count and by total bytes of cached text.
* The SQLite store survives restarts and is shared by every process of a multi-GPU run: WAL journaling
  lets readers run beside one writer.
* Entries expire after ``ttl_s`` seconds in both layers.
* Concurrent identical calls are coalesced: the first runs, the rest await its result.
* Only successful results are stored; an error is never cached, so a transient failure is retried next time.

The cache can only make a call slower, never fail it. Lookups run in a worker thread with a short busy
timeout; after a failed lookup the store is skipped for a few seconds, so a write lock held by another
process, a corrupted page or a truncated file costs one bounded wait, not one per call. Writes go to a
background thread and are never waited for; a file deleted mid-run is noticed before the next write and
recreated. Every failure is counted in :attr:`ToolCache.errors` (logged as ``tools/cache_errors``) and the
call simply runs uncached. Only a file that can never work (not a database, read-only, a folder) is an
error, raised when the cache is created, naming the file.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import json
import logging
import queue
import sqlite3
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from swift_rlfactory.runtime.json_api import sendable

logger = logging.getLogger(__name__)

OPEN_TIMEOUT_S = 2.0
"""Longest the start-up check waits for a lock held elsewhere before it lets the cache start anyway."""
READ_TIMEOUT_S = 0.5
"""Longest a lookup waits for a lock held by another process before the call runs uncached."""
WRITE_TIMEOUT_S = 5.0
"""Longest the background writer waits for the write lock before it drops a batch."""
BACKOFF_S = 5.0
"""How long lookups skip the store after one failed."""
_PENDING_WRITES = 1024
"""Writes queued for the background writer; beyond this, new ones are dropped (and counted)."""


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


class _SQLiteStore:
    """Persistent key → text store, safe to share between processes, that never raises after it opened."""

    def __init__(self, path: Path):
        self.path = path
        self.errors = 0
        self._count_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._reader: sqlite3.Connection | None = None
        self._skip_until = 0.0
        self._opened: tuple[int, int] | None = None  # (device, inode) of the file the writer has open
        self._writes: queue.Queue[tuple[str, str, float | None] | None] = queue.Queue(_PENDING_WRITES)
        self._check()
        self._writer = threading.Thread(
            target=self._write_forever, name="rlfactory-cache-writer", daemon=True
        )
        self._writer.start()
        # Writes are queued, so a run that ends without close() would lose the last ones: flush at exit.
        atexit.register(_close_at_exit, weakref.ref(self))

    def _check(self) -> None:
        """Fail now, naming the file, if it can never work; only a lock held elsewhere is let through."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._connect(OPEN_TIMEOUT_S)
            try:
                # A write to the header page, rolled back, proves the file is writable; a damaged page
                # further in is left for the lookups to count, as it would be found mid-run anyway.
                (version,) = conn.execute("PRAGMA user_version").fetchone()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.execute(f"PRAGMA user_version = {int(version)}")
                finally:
                    conn.execute("ROLLBACK")
            finally:
                conn.close()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise ValueError(f"cannot use {self.path} as the tool cache's SQLite file: {exc}") from None
            logger.warning("tool cache %s is locked by another process; going on (%s)", self.path, exc)
        except (sqlite3.Error, OSError) as exc:
            raise ValueError(f"cannot use {self.path} as the tool cache's SQLite file: {exc}") from None

    def _connect(self, timeout: float) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=timeout, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS tool_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL, expires REAL)"
            )
        except BaseException:
            conn.close()
            raise
        return conn

    def get(self, key: str, now: float) -> tuple[str, float | None] | None:
        """The stored value and its expiry, or ``None`` when absent, expired, or the store cannot answer.

        A row that cannot be what this module wrote (a value that is not text, an expiry that is not a
        number: another version, a hand edit, bit rot) is a miss counted as an error; the call's result
        then overwrites it.
        """
        with self._read_lock:
            if time.monotonic() < self._skip_until:
                return None
            try:
                if self._reader is None:
                    self._reader = self._connect(READ_TIMEOUT_S)
                row = self._reader.execute(
                    "SELECT value, expires FROM tool_cache WHERE key = ?", (key,)
                ).fetchone()
            except Exception as exc:  # sqlite3.Error mostly; UnicodeEncodeError for text sqlite cannot bind
                self._failed("lookup", exc)
                self._skip_until = time.monotonic() + BACKOFF_S
                self._drop_reader()  # reopen next time: the file may have been replaced
                return None
        if row is None:
            return None
        value, expires = row
        if not isinstance(value, str) or not (expires is None or isinstance(expires, int | float)):
            self._failed("lookup", ValueError(f"unreadable row {key} ({type(value).__name__}, {expires!r})"))
            return None
        return (value, expires) if expires is None or expires >= now else None

    def put(self, key: str, value: str, expires: float | None) -> None:
        """Queue a write for the background writer.

        On an event loop this never waits (a full queue drops the write); from plain synchronous code a
        full queue makes the caller wait for the writer a little, which paces a bulk load.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            wait: float | None = WRITE_TIMEOUT_S
        else:
            wait = None
        try:
            if wait is None:
                self._writes.put_nowait((key, value, expires))
            else:
                self._writes.put((key, value, expires), timeout=wait)
        except queue.Full:
            self._failed("write", RuntimeError(f"{_PENDING_WRITES} writes already pending; dropped"))

    def _write_forever(self) -> None:
        conn: sqlite3.Connection | None = None
        done = False
        while not done:
            batch = [self._writes.get()]
            while len(batch) < 256:
                try:
                    batch.append(self._writes.get_nowait())
                except queue.Empty:
                    break
            done = None in batch
            rows = [item for item in batch if item is not None]
            if not rows:
                continue
            try:
                conn = self._writer_connection(conn)
                self._write_batch(conn, rows)
            except Exception as exc:
                self._failed(f"write of {len(rows)} entries", exc)
                if conn is not None:
                    conn.close()
                    conn = None
        if conn is not None:
            conn.close()

    def _writer_connection(self, conn: sqlite3.Connection | None) -> sqlite3.Connection:
        """``conn`` while the path still names the file it has open; else a connection to a new file there.

        A cleanup job or a user may delete the cache file (or its folder) mid-run. SQLite keeps writing to
        the deleted file without a word, so every later write would be lost and processes would stop
        sharing. Checked before each batch: on a mismatch the error is counted and logged, the old
        connections are closed and the file recreated. SQLite finds a database's -wal and -shm by name, and
        while another process still holds the deleted file they stay on disk: a new file beside them would
        read the old file's log as its own ("disk I/O error" on every access), so they are removed first
        (the other process keeps its open handles).
        """
        if conn is not None:
            if _identity(self.path) == self._opened:
                return conn
            with self._count_lock:
                self.errors += 1
            logger.warning("tool cache %s was deleted or replaced mid-run; writing to a new file", self.path)
            conn.close()
            with self._read_lock:
                self._drop_reader()
            if not self.path.exists():
                for side in ("-wal", "-shm"):
                    Path(f"{self.path}{side}").unlink(missing_ok=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._connect(WRITE_TIMEOUT_S)
        self._opened = _identity(self.path)
        return conn

    def _write_batch(self, conn: sqlite3.Connection, rows: list[tuple[str, str, float | None]]) -> None:
        """Write ``rows`` in one transaction; if one of them cannot be bound, the others one by one.

        A row SQLite cannot bind (text that is not UTF-8, a NUL in the SQL) fails the whole statement, and
        a batch holds up to 256 entries: only the bad row is dropped (and counted). Any other failure is
        the file's, and fails the batch.
        """
        try:
            _insert(conn, rows)
        except (ValueError, sqlite3.InterfaceError):
            for row in rows:
                try:
                    _insert(conn, [row])
                except (ValueError, sqlite3.InterfaceError) as exc:
                    self._failed(f"write of {row[0]!r}", exc)

    def _failed(self, what: str, exc: Exception) -> None:
        with self._count_lock:
            self.errors += 1
            first = self.errors == 1
        log = logger.warning if first else logger.debug  # one line per run; the metric counts the rest
        log("tool cache %s: %s failed, the call runs uncached: %s", self.path, what, exc)

    def close(self, timeout: float = 10.0) -> None:
        """Flush pending writes (waiting at most ``timeout`` seconds) and close the connections."""
        if self._writer.is_alive():
            with contextlib.suppress(queue.Full):  # a writer that stuck this long is left to the daemon
                self._writes.put(None, timeout=timeout)
            self._writer.join(timeout)
        with self._read_lock:
            self._drop_reader()

    def _drop_reader(self) -> None:
        """Close the lookup connection, if open (the caller holds ``_read_lock``); the next lookup opens one."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def _identity(path: Path) -> tuple[int, int] | None:
    """The (device, inode) pair of the file at ``path``, or ``None`` when there is none."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _insert(conn: sqlite3.Connection, rows: list[tuple[str, str, float | None]]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany("INSERT OR REPLACE INTO tool_cache (key, value, expires) VALUES (?, ?, ?)", rows)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _close_at_exit(store: weakref.ref[_SQLiteStore]) -> None:
    alive = store()
    if alive is not None:
        alive.close(timeout=2 * WRITE_TIMEOUT_S)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


class ToolCache:
    """Two-level cache of tool observations with coalescing of identical in-flight calls.

    Args:
        max_entries: most entries kept in memory.
        max_bytes: most bytes of observation text kept in memory (UTF-8).
        ttl_s: seconds an entry stays valid; ``None`` keeps entries forever.
        sqlite_path: file of the persistent store; ``None`` keeps the cache in memory only. A file that
            cannot be used (not an SQLite database, read-only, a folder) raises :class:`ValueError` here.

    ``hits``, ``misses`` and ``errors`` (failed store operations, each of which made a call run uncached
    or left a result unstored) are running counts for metrics.
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
            if self._store is not None:
                stored = await self._astore_get(key)
                if stored is not None:
                    self.hits += 1
                    future.set_result(stored)
                    return stored, True
            self.misses += 1
            value = await run()
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
        self.put(key, value)
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
