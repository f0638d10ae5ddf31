"""Fault injection at the tool cache: real SQLite files and real sibling processes.

A cache can only make a call slower, never fail it: a write lock held by another process, a corrupted
page, a file truncated under us, a leader cancelled mid-call. A file that can never work fails when the
environment loads, naming ``cache.sqlite_path`` and the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from swift_rlfactory.env.config import EnvConfigError
from swift_rlfactory.env.environment import Environment
from swift_rlfactory.tools import Limits, ToolCache, ToolCall, ToolExecutor, tool
from swift_rlfactory.tools import cache_sqlite as cache_module
from swift_rlfactory.tools.cache import cache_key
from swift_rlfactory.tools.executor import call_cache_key
from swift_rlfactory.tools.toolset import PythonProvider

runs = {"n": 0}


@tool
async def lookup(key: str) -> str:
    """Count real executions."""
    runs["n"] += 1
    await asyncio.sleep(0.01)
    return key.upper()


@tool
async def nap(seconds: float) -> str:
    """Sleep (never cached)."""
    await asyncio.sleep(seconds)
    return "rested"


@tool
def page(size: int) -> str:
    """A long result."""
    return "p" * size


def make(cache: ToolCache, **limits) -> ToolExecutor:
    provider = PythonProvider([lookup, nap, page])
    return ToolExecutor([provider], Limits(**limits), cache, cached_tools={"lookup", "page"}).start()


LOCKER = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    if sys.argv[2] == "create":
        conn.execute("CREATE TABLE tool_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL, expires REAL)")
    conn.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    time.sleep(60)
    """
)


def hold_lock(path: Path, mode: str) -> subprocess.Popen:
    """A sibling process holding SQLite's exclusive lock on ``path`` until killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(path), mode], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.timeout(60)
def test_write_lock_held_by_a_sibling_process_only_costs_the_store(tmp_path, monkeypatch):
    """Our WAL cache, a sibling holding the write lock: calls answer at once; failed writes are counted."""
    monkeypatch.setattr(cache_module, "WRITE_TIMEOUT_S", 0.3)
    path = tmp_path / "tools.sqlite"
    cache = ToolCache(sqlite_path=path)
    locker = hold_lock(path, "open")
    try:
        with make(cache) as ex:
            t0 = time.perf_counter()
            records = ex.execute([ToolCall("lookup", {"key": f"k{i}"}) for i in range(30)])
            assert time.perf_counter() - t0 < 3  # the old cache froze for 30 s on the first write
            assert [r.observation for r in records] == [f"K{i}" for i in range(30)]
            deadline = time.monotonic() + 10
            while cache.errors == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert cache.errors >= 1  # the background writer gave up on the lock and said so
            [again] = ex.execute([ToolCall("lookup", {"key": "k1"})])
            assert again.cache_hit  # the memory level still serves
    finally:
        locker.kill()
        locker.wait()


@pytest.mark.timeout(60)
def test_sibling_locking_a_fresh_file_slows_lookups_boundedly(tmp_path, monkeypatch):
    """A rollback-journal file locked before we open it: lookups wait once, then calls run uncached."""
    monkeypatch.setattr(cache_module, "OPEN_TIMEOUT_S", 0.3)
    monkeypatch.setattr(cache_module, "WRITE_TIMEOUT_S", 0.3)
    path = tmp_path / "tools.sqlite"
    locker = hold_lock(path, "create")
    try:
        cache = ToolCache(sqlite_path=path)  # a lock is not a config error: we go on
        with make(cache) as ex:
            t0 = time.perf_counter()
            records = ex.execute(
                [ToolCall("lookup", {"key": f"k{i}"}) for i in range(30)] + [ToolCall("nap", {"seconds": 0})]
            )
            elapsed = time.perf_counter() - t0
            assert all(r.ok for r in records) and records[0].observation == "K0"
            assert records[-1].latency_s < 0.4  # the loop was free while lookups waited in threads
            assert elapsed < 5  # one bounded wait, then the store is skipped; not 30 x 0.5 s
            assert cache.errors >= 1
    finally:
        locker.kill()
        locker.wait()


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(8192))


def _folder(path: Path) -> None:
    path.mkdir()


def _under_a_file(path: Path) -> Path:
    path.write_text("a file, not a folder")
    return path / "tools.sqlite"


@pytest.mark.parametrize("spoil", [_garbage, _folder, _under_a_file], ids=["garbage", "folder", "under-file"])
def test_unusable_file_fails_at_load_naming_field_and_file(tmp_path, spoil):
    target = tmp_path / "tools.sqlite"
    path = spoil(target) or target
    with pytest.raises(ValueError, match="cannot use .*tools.sqlite"):
        ToolCache(sqlite_path=path)
    env = tmp_path / "env.yaml"
    tools = Path(__file__).resolve().parents[2] / "examples" / "calculator" / "tools.py"
    env.write_text(
        f"name: t\ntools: {{python: ['{tools}']}}\ncache: {{tools: ['*'], sqlite_path: '{path}'}}\n"
    )
    with pytest.raises(EnvConfigError, match="cache.sqlite_path: cannot use") as info:
        Environment.load(env)
    assert str(path) in str(info.value)


def test_read_only_file_fails_at_load(tmp_path):
    """Root ignores file modes, so make the file immutable (chattr +i) where the filesystem allows it."""
    path = tmp_path / "tools.sqlite"
    ToolCache(sqlite_path=path).close()
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", path]).returncode:
            pytest.skip("running as root on a filesystem without chattr +i: cannot make a read-only file")
    else:
        path.chmod(0o444)
    try:
        with pytest.raises(ValueError, match="cannot use .*tools.sqlite.*readonly database"):
            ToolCache(sqlite_path=path)
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", path], check=True)


def _fill(path: Path, n: int) -> None:
    cache = ToolCache(sqlite_path=path)
    for i in range(n):
        cache.put(call_cache_key("lookup", {"key": f"k{i}"}, Limits()), f"K{i}" * 50)
    cache.close()
    with sqlite3.connect(path) as conn:  # fold the WAL into the main file, so damage there is real
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


@pytest.mark.timeout(60)
def test_corrupted_pages_never_raise_at_lookup(tmp_path):
    path = tmp_path / "tools.sqlite"
    _fill(path, 2000)
    with open(path, "r+b") as f:  # keep page 1 (header, schema); scribble over the table's pages
        f.seek(4096)
        f.write(os.urandom(path.stat().st_size - 4096))
    cache = ToolCache(sqlite_path=path)
    with make(cache) as ex:
        records = ex.execute([ToolCall("lookup", {"key": f"k{i}"}) for i in range(0, 2000, 100)])
    assert all(r.ok for r in records) and records[1].observation == "K100"
    assert cache.errors >= 1
    # the training metric tools/cache_errors reports each failure once, in the batch that saw it
    assert cache.drain_errors() == cache.errors and cache.drain_errors() == 0
    cache.close()


@pytest.mark.parametrize("value, expires", [("HI", "2030-01-01"), (b"HI", None)])
def test_an_unreadable_row_is_a_counted_miss_and_is_overwritten(tmp_path, value, expires):
    """A row another version, a hand edit or bit rot left with a text expiry or a binary value is a miss,
    counted as a cache error; the call runs, and its result replaces the row."""
    path = tmp_path / "tools.sqlite"
    ToolCache(sqlite_path=path).close()
    key = call_cache_key("lookup", {"key": "hi"}, Limits())
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO tool_cache VALUES (?, ?, ?)", (key, value, expires))
    cache = ToolCache(sqlite_path=path)
    assert cache.get(key) is None and cache.errors == 1
    with make(cache) as ex:
        [record] = ex.execute([ToolCall("lookup", {"key": "hi"})])
    assert record.ok and record.observation == "HI" and not record.cache_hit
    assert ToolCache(sqlite_path=path).get(key) == "HI"


def test_one_unstorable_entry_costs_only_itself(tmp_path):
    """A lone surrogate in a value (half an emoji in a judge reply) is stored as U+FFFD; a key SQLite cannot
    bind at all is dropped and counted, alone: the other entries queued in the same batch are written."""
    path = tmp_path / "tools.sqlite"
    cache = ToolCache(sqlite_path=path)
    for i in range(100):
        cache.put(f"tool:{i}", f"good {i}")
    cache.put("judge:x", "score 5 \ud83d")
    cache.put("judge:\ud83d", "unbindable key")
    for i in range(100, 150):
        cache.put(f"tool:{i}", f"good {i}")
    cache.close()
    assert cache.errors == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM tool_cache").fetchone() == (151,)
    assert ToolCache(sqlite_path=path).get("judge:x") == "score 5 \ufffd"


def _stored(path: Path, key: str, within_s: float = 10.0) -> bool:
    """Whether ``key`` reaches the file at ``path`` (the writer is asynchronous) within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.exists():  # read-only, so that looking never creates the file
            uri = f"file:{path}?mode=ro"
            with (
                contextlib.suppress(sqlite3.Error),
                contextlib.closing(sqlite3.connect(uri, uri=True)) as conn,
            ):
                if conn.execute("SELECT 1 FROM tool_cache WHERE key = ?", (key,)).fetchone():
                    return True
        time.sleep(0.05)
    return False


@pytest.mark.timeout(60)
@pytest.mark.parametrize("delete", ["folder", "file"])
def test_file_deleted_mid_run_is_recreated(tmp_path, delete):
    """A cleanup job removes the cache folder (or just the file) mid-run: the writer notices at its next
    batch, counts it, and writes to a new file at the same path, which sibling processes share again."""
    path = tmp_path / ".cache" / "tools.sqlite"
    cache = ToolCache(sqlite_path=path)
    cache.put("before", "1")
    assert _stored(path, "before")
    if delete == "folder":
        shutil.rmtree(path.parent)
    else:
        path.unlink()
    for i in range(100):
        cache.put(f"after{i}", "v")
    assert _stored(path, "after99")
    cache.close()
    assert cache.errors == 1
    sibling = ToolCache(sqlite_path=path)
    assert sibling.get("after5") == "v" and sibling.get("before") is None
    sibling.close()


HOLDER = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint=0")  # its writes stay in the -wal, as a busy rank's do
    for i in range(200):
        conn.execute("INSERT OR REPLACE INTO tool_cache VALUES (?, ?, NULL)", (f"other{i}", "x" * 500))
    print("ready", flush=True)
    time.sleep(60)
    """
)


@pytest.mark.timeout(60)
def test_file_deleted_while_another_process_holds_it_is_recreated_clean(tmp_path):
    """Another rank still has the deleted file open, so its -wal and -shm stay on disk: the new file must
    not take them for its own (every access was a 'disk I/O error', and the next run failed to start)."""
    path = tmp_path / "tools.sqlite"
    cache = ToolCache(sqlite_path=path)
    cache.put("before", "1")
    assert _stored(path, "before")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        path.unlink()
        for i in range(100):
            cache.put(f"after{i}", "v")
        assert _stored(path, "after99")
        assert cache.get("after5") == "v" and cache.errors == 1
        sibling = ToolCache(sqlite_path=path)  # a process starting now opens the new file
        assert sibling.get("after5") == "v" and sibling.get("other3") is None
        sibling.close()
    finally:
        holder.kill()
        holder.wait()
    cache.close()


@pytest.mark.timeout(60)
def test_file_truncated_mid_run_heals(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "BACKOFF_S", 0.5)
    path = tmp_path / "tools.sqlite"
    cache = ToolCache(sqlite_path=path)
    with make(cache) as ex:
        ex.execute([ToolCall("lookup", {"key": f"a{i}"}) for i in range(50)])
        # The database and its log, not the -shm index: SQLite maps that into memory, and shrinking a
        # mapped file under a process is a SIGBUS no code can catch.
        for suffix in ("", "-wal"):
            if Path(f"{path}{suffix}").exists():
                os.truncate(f"{path}{suffix}", 0)
        cache._memory.clear()  # force the store to answer
        records = ex.execute([ToolCall("lookup", {"key": f"a{i}"}) for i in range(50)])
        assert all(r.ok for r in records) and records[7].observation == "A7"
        time.sleep(cache_module.BACKOFF_S + 0.1)  # let a failed lookup's back-off pass
        ex.execute([ToolCall("lookup", {"key": "after"})])
    cache.close()
    fresh = ToolCache(sqlite_path=path)  # writes after the damage landed in a working file
    assert fresh.get(call_cache_key("lookup", {"key": "after"}, Limits())) == "AFTER"


def test_cache_stores_the_cut_observation_not_the_whole_result(tmp_path):
    path = tmp_path / "tools.sqlite"
    with make(ToolCache(sqlite_path=path), max_output_tokens=50) as ex:
        [first] = ex.execute([ToolCall("page", {"size": 5_000_000})])
    marker = "\n... [truncated 4999835 characters]"  # 200 characters (50 tokens) in all, the marker included
    assert first.observation == "p" * (200 - len(marker)) + marker
    assert first.result_chars == 5_000_000 and first.truncated_chars == 4_999_835
    stored = ToolCache(sqlite_path=path).get(
        call_cache_key("page", {"size": 5_000_000}, Limits(max_output_tokens=50))
    )
    assert stored == first.observation and len(stored) < 300
    with make(ToolCache(sqlite_path=path), max_output_tokens=50) as ex:  # a new process's view
        [hit] = ex.execute([ToolCall("page", {"size": 5_000_000})])
    assert hit.cache_hit and hit.observation == first.observation
    assert (hit.result_chars, hit.truncated_chars) == (first.result_chars, first.truncated_chars)


def test_observations_cut_by_an_older_rule_are_not_replayed(tmp_path):
    """Until 2026-12-02 a 50-token cut kept 200 characters and put the marker after them, over the cap; a
    cache file kept from then holds such entries, under the key of that rule, and they stay unused."""
    path = tmp_path / "tools.sqlite"
    old = ToolCache(sqlite_path=path)
    old.put(
        cache_key("page", {"size": 1000}, "|max_output_tokens=50,chars"),
        "p" * 200 + "\n... [truncated 800 characters]",
    )
    old.close()
    with make(ToolCache(sqlite_path=path), max_output_tokens=50) as ex:
        [r] = ex.execute([ToolCall("page", {"size": 1000})])
    assert not r.cache_hit and r.observation == "p" * 168 + "\n... [truncated 832 characters]"  # 199 in all


@pytest.mark.timeout(30)
def test_twins_are_released_when_the_leader_is_cancelled():
    cache = ToolCache()
    calls = 0

    async def run():
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.2)
        return f"run {calls}"

    async def main():
        leader = asyncio.create_task(cache.get_or_run("k", run))
        await asyncio.sleep(0.05)
        twins = [asyncio.create_task(cache.get_or_run("k", run)) for _ in range(5)]
        await asyncio.sleep(0.05)
        leader.cancel()
        results = await asyncio.wait_for(asyncio.gather(*twins), 5)
        with pytest.raises(asyncio.CancelledError):
            await leader
        return results

    results = asyncio.run(main())
    assert calls == 2  # one twin took over; the other four shared its result
    assert sorted(hit for _, hit in results) == [False] + [True] * 4
    assert {value for value, _ in results} == {"run 2"}


@pytest.mark.timeout(30)
def test_twins_are_released_when_the_store_fails(tmp_path):
    path = tmp_path / "tools.sqlite"
    cache = ToolCache(sqlite_path=path)
    path.unlink()
    _garbage(path)  # the file is replaced by garbage under an open cache

    async def run():
        await asyncio.sleep(0.1)
        return "value"

    async def main():
        return await asyncio.wait_for(asyncio.gather(*(cache.get_or_run("k", run) for _ in range(6))), 5)

    results = asyncio.run(main())
    assert [v for v, _ in results] == ["value"] * 6
    cache.close()


@pytest.mark.timeout(60)
def test_queued_writes_survive_a_process_that_never_closes(tmp_path):
    path = tmp_path / "tools.sqlite"
    child = (
        "import sys; from swift_rlfactory.tools.cache import ToolCache\n"
        "c = ToolCache(sqlite_path=sys.argv[1])\n"
        "[c.put(f'k{i}', f'v{i}') for i in range(300)]\n"  # no close(): the exit must flush
    )
    subprocess.run([sys.executable, "-c", child, str(path)], check=True, timeout=50)
    reader = ToolCache(sqlite_path=path)
    assert all(reader.get(f"k{i}") == f"v{i}" for i in range(300))
