"""The tool cache's Redis store: one Redis or Valkey server shared by every process of a run, on any machine.

Entries expire by the server's per-key TTL; a sorted index bounds their number and bytes (oldest out
first); identical calls in different processes are coalesced through a lock key that its holder keeps
alive. A server that is down or failing never fails a call: it runs uncached, counted and warned about
once. Only a URL that can never work is an error, raised when the store is created. Rules: docs/cache.md.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import queue
import threading
import time
import uuid
import weakref
from typing import Any, Literal
from urllib.parse import urlsplit

import redis

logger = logging.getLogger(__name__)

PREFIX = "swift-rlfactory:tool-cache:"
"""Every key this store writes starts with this."""
TIMEOUT_S = 1.0
"""Longest one command (or a connection attempt) may take before the call runs uncached."""
BACKOFF_S = 5.0
"""How long the store is skipped after a command failed, so a dead server costs one wait, not one a call."""
LOCK_TTL_S = 10.0
"""A claim on a key lives this long unless its holder refreshes it: a crashed holder frees it this soon."""
POLL_S = (0.02, 0.25)
"""First and longest pause between looks at a key another process is computing."""
_PENDING = 1024
"""Writes queued for the background writer; beyond this, new ones are dropped (and counted)."""

# A hit, or else the claim to compute the key: {value, ms left}, 1 (claimed) or 0 (another holds it).
_CLAIM = """
local value = redis.call('GET', KEYS[1])
if value then return {value, redis.call('PTTL', KEYS[1])} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""
# Store one entry, then drop expired ones and the oldest until the bounds hold. The index scores entries by
# the server's clock, so machines whose clocks differ agree on what is old; a put in the same millisecond as
# the last one scores a thousandth above it (KEYS[5] keeps the last score), so "oldest" is the order of the
# writes and never the key names' (a sorted set orders equal scores by name).
_PUT = """
local index, sizes, total, last = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local function drop(key)
  local size = tonumber(redis.call('HGET', sizes, key) or '0')
  redis.call('DEL', key)
  redis.call('ZREM', index, key)
  redis.call('HDEL', sizes, key)
  redis.call('DECRBY', total, size)
end
drop(KEYS[1])
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl) else redis.call('SET', KEYS[1], ARGV[1]) end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local score = string.format('%.17g', math.max(now, tonumber(redis.call('GET', last) or '0') + 0.001))
redis.call('SET', last, score)
redis.call('ZADD', index, score, KEYS[1])
redis.call('HSET', sizes, KEYS[1], #ARGV[1])
redis.call('INCRBY', total, #ARGV[1])
local horizon = tonumber(ARGV[5])
if horizon > 0 then
  for _, key in ipairs(redis.call('ZRANGEBYSCORE', index, '-inf', now - horizon)) do drop(key) end
end
while redis.call('ZCARD', index) > tonumber(ARGV[3])
    or tonumber(redis.call('GET', total) or '0') > tonumber(ARGV[4]) do
  local oldest = redis.call('ZRANGE', index, 0, 0)[1]
  if not oldest then break end
  drop(oldest)
end
return 1
"""
_UNLOCK = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
_REFRESH = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"

_Claim = Literal["held", "busy", "free"]


class RedisStore:
    """Key → text store on a Redis server, shared by processes on any machine, that never raises once open.

    Args:
        url: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` (TLS) or ``unix://path``.
        max_entries, max_bytes: bounds of the entries kept on the server (bytes of UTF-8 text).
        ttl_s: lifetime of the entries, also used to sweep the index; ``None``: they live until evicted.
    """

    def __init__(self, url: str, max_entries: int, max_bytes: int, ttl_s: float | None):
        self.shown = shown_url(url)
        self.max_entries, self.max_bytes, self.ttl_s = max_entries, max_bytes, ttl_s
        self.errors = 0
        self._count_lock = threading.Lock()
        self._skip_until = 0.0
        self._held: dict[str, str] = {}  # key -> token of the claims this process holds
        try:
            self._client = redis.Redis.from_url(
                url, decode_responses=True, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S
            )
        except ValueError as exc:  # not a URL the client reads (scheme, port, database)
            raise ValueError(f"cannot use {self.shown} as the tool cache's Redis server: {exc}") from None
        self._claim = self._client.register_script(_CLAIM)
        self._put = self._client.register_script(_PUT)
        self._unlock = self._client.register_script(_UNLOCK)
        self._refresh = self._client.register_script(_REFRESH)
        self._check()
        self._writes: queue.Queue[tuple[Any, ...] | None] = queue.Queue(_PENDING)
        self._writer = threading.Thread(
            target=self._write_forever, name="rlfactory-redis-writer", daemon=True
        )
        self._writer.start()
        atexit.register(_close_at_exit, weakref.ref(self))  # writes are queued: flush them at exit

    def _check(self) -> None:
        """Fail now if the server refuses us for good (credentials); a server that is down is let through."""
        try:
            self._client.ping()
        except (redis.AuthenticationError, redis.ResponseError) as exc:
            raise ValueError(f"cannot use {self.shown} as the tool cache's Redis server: {exc}") from None
        except (redis.RedisError, OSError) as exc:
            self._failed("connection", exc)

    def get(self, key: str, now: float) -> tuple[str, float | None] | None:
        """The stored value and its expiry, or ``None`` when absent, expired or the server cannot answer."""
        if time.monotonic() < self._skip_until:
            return None
        try:
            with self._client.pipeline(transaction=False) as pipe:
                value, left_ms = pipe.get(_value(key)).pttl(_value(key)).execute()
        except (redis.RedisError, OSError) as exc:
            self._failed("lookup", exc)
            return None
        if not isinstance(value, str):
            return None
        return value, (None if left_ms < 0 else now + left_ms / 1000)

    def put(self, key: str, value: str, expires: float | None) -> None:
        """Queue a write for the background writer (never waits; a full queue drops it, counted)."""
        if len(value.encode("utf-8")) > self.max_bytes:
            return  # larger than the whole cache may hold: not stored, as in memory
        self._queue(("put", key, value, expires))

    async def claim(self, key: str) -> tuple[str, float | None] | None:
        """Another process's result for ``key`` (waiting while it computes it), or ``None``: compute it here.

        The claim is a lock key set only if absent, with a :data:`LOCK_TTL_S` expiry the writer refreshes
        while the holder runs; a holder that crashed stops refreshing and its claim lapses. A holder whose
        call failed releases it without a value: one waiter claims it and computes instead.
        """
        token, pause = uuid.uuid4().hex, POLL_S[0]
        while True:
            try:
                answer = await asyncio.to_thread(self._claim_once, key, token)
            except RuntimeError:  # the loop's executor is shutting down
                return None
            if answer == "held":
                self._held[key] = token
                return None
            if answer == "free":  # the server cannot coordinate: compute without a claim
                return None
            if answer != "busy":
                return answer
            await asyncio.sleep(pause)
            pause = min(pause * 2, POLL_S[1])

    def _claim_once(self, key: str, token: str) -> tuple[str, float | None] | _Claim:
        if time.monotonic() < self._skip_until:
            return "free"
        try:
            answer = self._claim(keys=[_value(key), _lock(key)], args=[token, int(LOCK_TTL_S * 1000)])
        except (redis.RedisError, OSError) as exc:
            self._failed("claim", exc)
            return "free"
        if isinstance(answer, list):
            value, left_ms = answer
            return value, (None if left_ms < 0 else time.time() + left_ms / 1000)
        return "held" if answer == 1 else "busy"

    def release(self, key: str) -> None:
        """Release this process's claim on ``key``, after any write queued before."""
        token = self._held.pop(key, None)
        if token is not None:
            self._queue(("release", key, token))

    def _queue(self, item: tuple[Any, ...]) -> None:
        try:
            self._writes.put_nowait(item)
        except queue.Full:
            self._failed(item[0], RuntimeError(f"{_PENDING} writes already pending; dropped"))

    def _write_forever(self) -> None:
        """Apply queued writes and releases in order; between them, keep this process's claims alive."""
        refreshed = time.monotonic()
        while True:
            try:
                item = self._writes.get(timeout=LOCK_TTL_S / 4)
            except queue.Empty:
                item = ()
            if item is None:
                return
            if item:
                self._apply(item)
            if time.monotonic() - refreshed > LOCK_TTL_S / 4:
                refreshed = time.monotonic()
                self._keep_claims()

    def _apply(self, item: tuple[Any, ...]) -> None:
        if time.monotonic() < self._skip_until:
            if item[0] == "put":  # the server failed a moment ago: the result stays unstored
                self._failed("write", RuntimeError("the server failed a moment ago; skipped"))
            return
        try:
            if item[0] == "put":
                _, key, value, expires = item
                left_ms = 0 if expires is None else max(1, int((expires - time.time()) * 1000))
                horizon_ms = 0 if self.ttl_s is None else int(self.ttl_s * 1000)
                self._put(
                    keys=[_value(key), PREFIX + "index", PREFIX + "sizes", PREFIX + "bytes", PREFIX + "last"],
                    args=[value, left_ms, self.max_entries, self.max_bytes, horizon_ms],
                )
            else:
                _, key, token = item
                self._unlock(keys=[_lock(key)], args=[token])
        except (redis.RedisError, OSError) as exc:
            self._failed(item[0], exc)

    def _keep_claims(self) -> None:
        for key, token in list(self._held.items()):
            try:
                self._refresh(keys=[_lock(key)], args=[token, int(LOCK_TTL_S * 1000)])
            except (redis.RedisError, OSError) as exc:
                self._failed("claim refresh", exc)
                return

    def _failed(self, what: str, exc: Exception) -> None:
        """Count a failure and skip the server for :data:`BACKOFF_S`; the first one of the run is a warning."""
        with self._count_lock:
            self.errors += 1
            first = self.errors == 1
            self._skip_until = time.monotonic() + BACKOFF_S
        log = logger.warning if first else logger.debug  # one line per run; the metric counts the rest
        log("tool cache %s: %s failed, calls run uncached: %s", self.shown, what, exc)

    def close(self, timeout: float = 5.0) -> None:
        """Flush pending writes (waiting at most ``timeout`` seconds) and close the connections."""
        if self._writer.is_alive():
            with contextlib.suppress(queue.Full):
                self._writes.put(None, timeout=timeout)
            self._writer.join(timeout)
        self._client.close()


def shown_url(url: str) -> str:
    """``url`` as messages show it: the password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username or ''}:***@{host}").geturl()


def _value(key: str) -> str:
    return f"{PREFIX}value:{key}"


def _lock(key: str) -> str:
    return f"{PREFIX}claim:{key}"


def _close_at_exit(store: weakref.ref[RedisStore]) -> None:
    alive = store()
    if alive is not None:
        alive.close(timeout=2 * TIMEOUT_S)
