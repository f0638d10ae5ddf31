"""Tool cache: canonical keys, LRU bounds, TTL, SQLite persistence across processes, coalescing."""

import asyncio
import multiprocessing as mp
import time

import pytest

from swift_rlfactory.tools.cache import ToolCache, cache_key


def test_key_is_canonical():
    assert cache_key("t", {"a": 1, "b": [1, 2]}) == cache_key("t", {"b": [1, 2], "a": 1})
    assert cache_key("t", {"a": 1}) != cache_key("u", {"a": 1})
    assert cache_key("t", {"a": 1}) != cache_key("t", {"a": 2})


def test_namespace_separates_keys_and_empty_keeps_the_old_ones(tmp_path):
    """Two envs whose ``search`` tools differ, or one run with a new output budget, share a cache file
    without replaying each other's observations; no namespace keeps the keys existing files hold."""
    arguments = {"q": "aspirin"}
    wiki, pubmed = (cache_key("search", arguments, namespace=ns) for ns in ("wiki|512", "pubmed|512"))
    assert wiki != pubmed != cache_key("search", arguments)
    assert cache_key("search", arguments, namespace="") == cache_key("search", arguments)
    assert cache_key("search", {"q": "aspirin", "k": 1}, namespace="wiki") == cache_key(
        "search", {"k": 1, "q": "aspirin"}, namespace="wiki"
    )
    first = ToolCache(sqlite_path=tmp_path / "shared.sqlite")
    first.put(wiki, "wikipedia result")
    first.close()
    second = ToolCache(sqlite_path=tmp_path / "shared.sqlite")
    assert second.get(pubmed) is None and second.get(wiki) == "wikipedia result"
    second.close()


def test_lru_bounded_by_entries_and_bytes():
    cache = ToolCache(max_entries=3, max_bytes=1000)
    for i in range(4):
        cache.put(f"k{i}", "x")
    assert cache.get("k0") is None and len(cache) == 3
    cache.get("k1")  # touch: k2 is now least recently used
    cache.put("k4", "x")
    assert cache.get("k1") == "x" and cache.get("k2") is None

    small = ToolCache(max_entries=100, max_bytes=10)
    small.put("a", "12345")
    small.put("b", "12345")
    small.put("c", "12345")
    assert small.get("a") is None and small.get("b") == "12345" and small.get("c") == "12345"
    small.put("huge", "x" * 11)  # larger than the whole budget: not kept, nothing else evicted
    assert small.get("huge") is None and small.get("c") == "12345"


def test_ttl_expires_entries(tmp_path):
    cache = ToolCache(ttl_s=0.2, sqlite_path=tmp_path / "c.sqlite")
    cache.put("k", "v")
    assert cache.get("k") == "v"
    time.sleep(0.3)
    assert cache.get("k") is None


@pytest.mark.parametrize("lookup", ["get", "get_or_run"])
def test_an_entry_loaded_from_the_store_keeps_its_expiry(tmp_path, lookup):
    """An entry read back from SQLite expires when it was stored to, not ``ttl_s`` after it was read."""
    path = tmp_path / "c.sqlite"
    first = ToolCache(ttl_s=1.0, sqlite_path=path)
    first.put("k", "stale")
    first.close()
    time.sleep(0.6)
    second = ToolCache(ttl_s=1.0, sqlite_path=path)

    async def fresh() -> str:
        return "fresh"

    if lookup == "get":
        assert second.get("k") == "stale"
    else:
        assert asyncio.run(second.get_or_run("k", fresh)) == ("stale", True)
    time.sleep(0.6)  # past the stored expiry, within a fresh ttl_s of the read
    assert second.get("k") is None
    assert asyncio.run(second.get_or_run("k", fresh)) == ("fresh", False)
    second.close()


def test_sqlite_store_survives_restart(tmp_path):
    path = tmp_path / "cache.sqlite"
    first = ToolCache(sqlite_path=path)
    first.put("k", "value")
    first.close()
    second = ToolCache(sqlite_path=path)
    assert second.get("k") == "value"


def _writer(path: str, worker: int, n: int) -> None:
    cache = ToolCache(sqlite_path=path)
    for i in range(n):
        cache.put(f"w{worker}-{i}", f"{worker}:{i}")
    cache.close()


def test_sqlite_store_safe_with_several_writing_processes(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 200)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    reader = ToolCache(sqlite_path=path)
    assert all(reader.get(f"w{w}-{i}") == f"{w}:{i}" for w in range(4) for i in range(200))


def test_identical_in_flight_calls_run_once():
    cache = ToolCache()
    runs = 0

    async def run():
        nonlocal runs
        runs += 1
        await asyncio.sleep(0.05)
        return "result"

    async def main():
        return await asyncio.gather(*(cache.get_or_run("k", run) for _ in range(10)))

    results = asyncio.run(main())
    assert runs == 1
    assert sorted(hit for _, hit in results) == [False] + [True] * 9
    assert cache.hits == 9 and cache.misses == 1


def test_errors_are_not_cached():
    cache = ToolCache()
    attempts = 0

    async def flaky():
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise RuntimeError("transient")
        return "ok"

    with pytest.raises(RuntimeError):
        asyncio.run(cache.get_or_run("k", flaky))
    assert cache.get("k") is None
    assert asyncio.run(cache.get_or_run("k", flaky)) == ("ok", False)
    assert asyncio.run(cache.get_or_run("k", flaky)) == ("ok", True)
