"""The tool cache's SQLite store: a file on a local disk shared by every process of one machine.

WAL journaling lets readers run beside one writer. The store can only make a call slower, never fail it:
lookups use a short busy timeout, after a failed lookup the store is skipped for a few seconds, writes go
to a background thread, and a file deleted mid-run is recreated. Only a file that can never work (not a
database, read-only, a folder, on a network file system) is an error, raised when the store is created.
The rules and their reasons: docs/cache.md.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import queue
import re
import sqlite3
import threading
import time
import weakref
from pathlib import Path

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
MOUNTS = Path("/proc/mounts")
"""The mount table read to find the file system the SQLite file lies on."""
NETWORK_FILESYSTEMS = frozenset(
    {
        *("nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ncpfs", "afs", "davfs", "coda"),
        *("ceph", "glusterfs", "lustre", "gpfs", "beegfs", "orangefs", "pvfs2", "ocfs2", "gfs2"),
        *("fuse.sshfs", "fuse.ceph", "fuse.glusterfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.rclone"),
        *("fuse.juicefs", "fuse.beegfs", "fuse.lustre", "fuse.cephfs"),
    }
)
"""File systems where SQLite's WAL mode is unsafe: shared between machines, or with locks and shared memory
that do not work as on a local disk (docs/cache.md)."""


class SQLiteStore:
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
            kind = network_filesystem(self.path)
            if kind is not None:
                raise ValueError(
                    f"cannot use {self.path} as the tool cache's SQLite file: it lies on a network file "
                    f"system ({kind}), where SQLite's WAL journaling is unsafe (its shared-memory index "
                    "works only between processes of one machine and the file locks are unreliable, so "
                    "writes are lost or the file is corrupted); put the file on a local disk, or share the "
                    "cache between machines through a Redis or Valkey server (cache.redis_url)"
                )
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

    async def claim(self, key: str) -> None:
        """Processes do not coordinate through the file: each computes what it misses."""
        return None

    def release(self, key: str) -> None:
        """Nothing to release (see :meth:`claim`)."""

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


def _close_at_exit(store: weakref.ref[SQLiteStore]) -> None:
    alive = store()
    if alive is not None:
        alive.close(timeout=2 * WRITE_TIMEOUT_S)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def network_filesystem(path: Path) -> str | None:
    """The type of the network file system ``path`` lies on (by :data:`MOUNTS`), or ``None`` for a local one
    or when the mount table cannot be read (not Linux)."""
    try:
        mounts = MOUNTS.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    kind = filesystem_of(str(path.resolve()), mounts)
    return kind if kind in NETWORK_FILESYSTEMS else None


def filesystem_of(path: str, mounts: str) -> str | None:
    """The file system type of the absolute ``path`` by a ``/proc/mounts``-style table: that of the mount
    point that is its longest prefix (the later line of two equal ones, as a mount over a mount hides the
    first); ``None`` if no line covers it. Mount points are read with their octal escapes (``\\040`` for a
    space)."""
    found, longest = None, -1
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _OCTAL.sub(lambda m: chr(int(m[1], 8)), fields[1]).rstrip("/") or "/"
        covers = point == "/" or path == point or path.startswith(point + "/")
        if covers and len(point) >= longest:
            found, longest = fields[2], len(point)
    return found


_OCTAL = re.compile(r"\\([0-7]{3})")
