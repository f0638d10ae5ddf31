"""The tool cache on a real Redis server (``redis-server`` started per test on a free 127.0.0.1 port): hits
and TTL, the bounds on the server, four processes sharing one cache (no lost writes, identical calls run
once), a crashed holder's claim lapsing, a server that dies or hangs mid-run, and URLs that can never work.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis

from swift_rlfactory.env.config import EnvConfigError, load_env_config
from swift_rlfactory.env.environment import Environment
from swift_rlfactory.tools import Limits, ToolCache, ToolCall, ToolExecutor, cache_redis, tool
from swift_rlfactory.tools.toolset import PythonProvider

REDIS_SERVER = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(
    REDIS_SERVER is None, reason="needs redis-server (apt-get install redis-server)"
)
ROOT = Path(__file__).resolve().parents[1]


class RedisServer:
    """A ``redis-server`` subprocess on a free port of 127.0.0.1, in the foreground, its files in ``folder``."""

    def __init__(self, folder: Path, *extra: str):
        self.process: subprocess.Popen | None = None
        for _ in range(5):  # another process may take the free port first
            self.port = _free_port()
            log = open(folder / f"redis-{self.port}.log", "wb")  # noqa: SIM115 (the server writes it)
            self.process = subprocess.Popen(
                [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                 "no", "--dir", str(folder), *extra],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            log.close()
            if self._answers():
                return
            self.kill()
        raise RuntimeError(f"redis-server did not start; see {folder}")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, db: int = 0) -> redis.Redis:
        return redis.Redis(port=self.port, db=db, decode_responses=True)

    def _answers(self) -> bool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                return redis.Redis(port=self.port, socket_timeout=1).ping()
            except redis.AuthenticationError:
                return True  # started with --requirepass
            except redis.ConnectionError:
                time.sleep(0.05)
        return False

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a stopped server must be able to die
            self.process.kill()
            self.process.wait(10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    started = RedisServer(tmp_path)
    yield started
    started.kill()


def test_hit_miss_and_ttl_expiry_across_caches(server):
    runs = []

    async def compute():
        runs.append(1)
        return "answer"

    first = ToolCache(ttl_s=1.0, redis_url=server.url)
    assert asyncio.run(first.get_or_run("k", compute)) == ("answer", False)
    first.close()  # flushes the queued write
    assert 0 < server.client().pttl(cache_redis._value("k")) <= 1000  # the server expires it
    second = ToolCache(ttl_s=1.0, redis_url=server.url)  # a fresh process's view: nothing in memory
    assert asyncio.run(second.get_or_run("k", compute)) == ("answer", True)
    assert (second.hits, second.misses, len(runs)) == (1, 0, 1)
    second.close()
    time.sleep(1.2)
    third = ToolCache(ttl_s=1.0, redis_url=server.url)
    assert third.get("k") is None
    assert asyncio.run(third.get_or_run("k", compute)) == ("answer", False) and len(runs) == 2
    third.close()
    assert third.errors == 0


def test_the_oldest_is_dropped_first_however_fast_the_writes_come(server):
    """Writes inside one millisecond of the server's clock still leave in the order they came, not in the
    order of their names (a sorted set orders equal scores by member: 2026-12-06 kept k14 and dropped k15)."""
    names = [f"k{n}" for n in (9, 30, 2, 111, 5, 70, 1, 48)]  # not in name order
    cache = ToolCache(max_entries=3, redis_url=server.url.replace("/0", "/2"))
    for name in names:
        cache.put(name, name)
    cache.close()
    reader = ToolCache(redis_url=server.url.replace("/0", "/2"))
    assert [name for name in names if reader.get(name) is not None] == names[-3:]
    reader.close()


def test_the_server_keeps_at_most_max_entries_and_max_bytes(server):
    counted = ToolCache(max_entries=5, redis_url=server.url)
    for i in range(20):
        counted.put(f"k{i}", f"value {i}")
    counted.close()
    client = server.client()
    assert client.zcard(cache_redis.PREFIX + "index") == 5
    assert len(client.keys(cache_redis._value("*"))) == 5
    reader = ToolCache(redis_url=server.url)
    assert [reader.get(f"k{i}") for i in (14, 15, 19)] == [None, "value 15", "value 19"]
    reader.close()

    sized = ToolCache(max_bytes=100, redis_url=server.url.replace("/0", "/1"))
    for i in range(10):
        sized.put(f"b{i}", f"{i}" * 30)
    sized.put("huge", "h" * 101)  # more than the whole cache may hold: never stored
    sized.close()
    client = server.client(db=1)
    assert int(client.get(cache_redis.PREFIX + "bytes")) == 90
    assert sorted(client.keys(cache_redis._value("*"))) == [cache_redis._value(f"b{i}") for i in (7, 8, 9)]


SHARER = textwrap.dedent(
    """
    import asyncio, json, pathlib, sys, time
    from swift_rlfactory.tools.cache import ToolCache

    url, folder, me = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3])
    cache = ToolCache(redis_url=url)
    (folder / f"ready{me}").touch()
    while len(list(folder.glob("ready*"))) < 4:  # start together
        time.sleep(0.005)

    async def twin():  # the identical call all four make: its body must run once
        with open(folder / "runs", "a") as runs:
            runs.write(f"{me}\\n")
        await asyncio.sleep(1.0)
        return "the shared answer"

    async def own(i):
        return f"{me}-{i}"

    async def main():
        shared = asyncio.create_task(cache.get_or_run("twin", twin))
        await asyncio.gather(*(cache.get_or_run(f"k{me}-{i}", lambda i=i: own(i)) for i in range(200)))
        return await shared

    value, hit = asyncio.run(main())
    cache.close()
    print(json.dumps({"value": value, "hit": hit, "errors": cache.errors}))
    """
)


@pytest.mark.timeout(180)
def test_four_processes_share_one_cache_with_no_lost_writes_and_one_run_of_twins(server, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", SHARER, server.url, str(tmp_path), str(me)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for me in range(4)
    ]
    reports = [json.loads(child.communicate(timeout=150)[0]) for child in children]
    assert all(child.returncode == 0 for child in children)
    assert (tmp_path / "runs").read_text().count("\n") == 1  # the tool body ran once for four calls
    assert [r["value"] for r in reports] == ["the shared answer"] * 4
    assert sorted(r["hit"] for r in reports) == [False, True, True, True]
    assert sum(r["errors"] for r in reports) == 0
    reader = ToolCache(redis_url=server.url)
    missing = [(me, i) for me in range(4) for i in range(200) if reader.get(f"k{me}-{i}") != f"{me}-{i}"]
    assert missing == []  # 800 writes from four processes, none lost
    assert server.client().zcard(cache_redis.PREFIX + "index") == 801
    reader.close()


HOLDER = textwrap.dedent(
    """
    import asyncio, pathlib, sys
    from swift_rlfactory.tools import cache_redis
    from swift_rlfactory.tools.cache import ToolCache

    cache_redis.LOCK_TTL_S = 1.0
    cache = ToolCache(redis_url=sys.argv[1])

    async def forever():
        pathlib.Path(sys.argv[2]).touch()
        await asyncio.sleep(3600)

    asyncio.run(cache.get_or_run("k", forever))
    """
)


@pytest.mark.timeout(60)
def test_a_crashed_holders_claim_lapses_and_a_waiter_computes(server, tmp_path):
    started = tmp_path / "started"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, server.url, str(started)], env=env)
    deadline = time.monotonic() + 40
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists()
    assert server.client().exists(cache_redis._lock("k"))  # the holder's claim
    holder.kill()
    holder.wait(10)
    cache = ToolCache(redis_url=server.url)

    async def compute():
        return "computed here"

    begun = time.monotonic()
    assert asyncio.run(cache.get_or_run("k", compute)) == ("computed here", False)
    assert time.monotonic() - begun < 5  # waited for the lapse (1 s), not forever
    cache.close()


runs = {"n": 0}


@tool
async def lookup(key: str) -> str:
    """Count real executions."""
    runs["n"] += 1
    return key.upper()


def make(cache: ToolCache) -> ToolExecutor:
    return ToolExecutor([PythonProvider([lookup])], Limits(), cache, cached_tools={"lookup"}).start()


@pytest.mark.timeout(60)
def test_a_server_killed_mid_run_leaves_calls_uncached_with_one_warning(server, caplog):
    caplog.set_level(logging.DEBUG, logger=cache_redis.__name__)
    with make(ToolCache(redis_url=server.url)) as ex:
        assert ex.execute([ToolCall(name="lookup", arguments={"key": "a"})])[0].observation == "A"
        server.kill()
        runs["n"] = 0
        records = ex.execute([ToolCall(name="lookup", arguments={"key": k}) for k in "bcdefgh"])
        records += ex.execute([ToolCall(name="lookup", arguments={"key": k}) for k in "bcd"])
        assert [r.observation for r in records] == list("BCDEFGHBCD")
        assert all(r.ok for r in records)
        assert runs["n"] == 7  # uncached in Redis; the memory level still answers repeats
        assert ex.cache.errors >= 1
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "calls run uncached" in warnings[0].getMessage()


@pytest.mark.timeout(60)
def test_a_hung_server_costs_one_timeout_not_one_per_call(server):
    cache = ToolCache(redis_url=server.url)
    server.process.send_signal(signal.SIGSTOP)  # accepts connections, never answers
    try:

        async def main():
            async def compute():
                return "v"

            return [await cache.get_or_run(f"k{i}", compute) for i in range(20)]

        begun = time.monotonic()
        assert asyncio.run(main()) == [("v", False)] * 20
        assert time.monotonic() - begun < 3 * cache_redis.TIMEOUT_S + 1
        assert cache.errors >= 1
    finally:
        server.kill()
        cache.close()


def _env_file(folder: Path, url: str) -> Path:
    (folder / "tools.py").write_text(
        "from swift_rlfactory.tools import tool\n\n@tool\ndef echo(text: str) -> str:\n"
        '    """Echo."""\n    return text\n'
    )
    path = folder / "env.yaml"
    path.write_text(f"tools:\n  python: [tools.py]\ncache:\n  tools: ['*']\n  redis_url: '{url}'\n")
    return path


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://127.0.0.1:6379", "not a Redis URL"),
        ("redis://127.0.0.1:notaport/0", "cannot use redis://127.0.0.1:notaport/0"),
        ("redis://127.0.0.1:6379/${RLF_UNSET_REDIS_DB}", "RLF_UNSET_REDIS_DB is not set"),
    ],
)
def test_a_bad_url_fails_at_start_naming_the_field(tmp_path, url, said):
    with pytest.raises(EnvConfigError, match="cache.redis_url") as info:
        Environment.load(_env_file(tmp_path, url)).close()
    assert said in str(info.value)


def test_refused_credentials_fail_at_start_without_showing_the_password(tmp_path, monkeypatch):
    guarded = RedisServer(tmp_path, "--requirepass", "the-right-one")
    try:
        monkeypatch.setenv("RLF_TEST_REDIS_PASSWORD", "wrong-password-123")
        url = f"redis://:${{RLF_TEST_REDIS_PASSWORD}}@127.0.0.1:{guarded.port}/0"
        with pytest.raises(EnvConfigError, match="cache.redis_url") as info:
            Environment.load(_env_file(tmp_path, url)).close()
        assert "wrong-password-123" not in str(info.value) and ":***@" in str(info.value)
        monkeypatch.setenv("RLF_TEST_REDIS_PASSWORD", "the-right-one")
        with Environment.load(_env_file(tmp_path, url)) as env:
            assert (
                env.executor.execute([ToolCall(name="echo", arguments={"text": "hi"})])[0].observation == "hi"
            )
            assert env.executor.cache.errors == 0
    finally:
        guarded.kill()


def test_a_server_down_at_start_is_not_an_error_and_both_stores_are(tmp_path):
    with Environment.load(_env_file(tmp_path, f"redis://127.0.0.1:{_free_port()}/0")) as env:
        record = env.executor.execute([ToolCall(name="echo", arguments={"text": "hi"})])[0]
        assert record.ok and not record.cache_hit and env.executor.cache.errors >= 1
    path = _env_file(tmp_path, "redis://127.0.0.1:6379/0")
    path.write_text(path.read_text() + "  sqlite_path: c.sqlite\n")
    with pytest.raises(EnvConfigError, match="cache: Value error, give either sqlite_path or redis_url"):
        load_env_config(path)
