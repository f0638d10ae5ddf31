"""MCP servers of ``scope: trajectory`` against real servers: one HTTP session per trajectory, a bounded pool
of stdio processes leased one per trajectory, reset or restarted between leases, and released at the end
of every episode.

Every trajectory runs through :class:`Environment` the way training does (``episodes.open``, its calls on
the executor keyed by its id, ``episodes.close``), against ``tests/servers/kv_server.py``: ``put`` and
``get`` on a store the server keeps in memory (per process over stdio, per MCP session over HTTP). After
each run the test counts what is left: server processes (``psutil``), sessions the server holds open, and
files in the servers' temp folder.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from swift_rlfactory.env.config import EnvConfigError
from swift_rlfactory.env.environment import Environment
from swift_rlfactory.tools import ToolCall, ToolExecutor
from swift_rlfactory.tools.executor import ToolRecord
from swift_rlfactory.tools.mcp import McpProvider
from swift_rlfactory.tools.mcp.config import McpServerConfig

from .test_mcp import free_port

pytestmark = pytest.mark.timeout(300)

KV_SERVER = Path(__file__).resolve().parent / "servers" / "kv_server.py"


def kv_processes() -> list[psutil.Process]:
    """Our child processes running the kv server over stdio (zombies awaiting their wait do not count; the
    HTTP server the module runs is no pool's)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            line = child.cmdline()
            if (
                child.status() != psutil.STATUS_ZOMBIE
                and str(KV_SERVER) in line
                and "--transport" not in line
            ):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def stdio_entry(**fields: Any) -> dict[str, Any]:
    return {"command": "python", "args": [str(KV_SERVER)], "scope": "trajectory", **fields}


def kv_env(tmp_path: Path, entry: dict[str, Any], *, episode: bool = False, **limits: Any) -> Environment:
    """A started environment whose only tools are the kv server's (``entry``), without ``episode:``
    unless asked (the lifecycle then exists for the server alone)."""
    config: dict[str, Any] = {
        "name": "kv",
        "tools": {"mcp": {"mcpServers": {"kv": entry}}},
        "limits": {"call_timeout_s": 10, "retries": 0, **limits},
    }
    if episode:
        (tmp_path / "state.py").write_text("def setup(row):\n    return {'row': row}\n")
        config["episode"] = {"setup": "state.py:setup"}
    path = tmp_path / "env.yaml"
    path.write_text(json.dumps(config))
    return Environment.load(path).start()


def provider(env: Environment) -> McpProvider:
    (found,) = [p for p in env.episodes.backends if isinstance(p, McpProvider)]
    return found


async def call(env: Environment, trajectory: str, name: str, **arguments: Any) -> ToolRecord:
    """One call of trajectory ``trajectory``, as its turn runs it (its state and its id)."""
    return await env.call_tool(name, arguments, env.episodes.state(trajectory), trajectory)


async def write_then_read(
    env: Environment, key: str, pause: float = 0.05, barrier: asyncio.Barrier | None = None
) -> tuple[str, str]:
    """One trajectory: its own value written, read back after the others wrote theirs (after ``pause``, or
    once every party of ``barrier`` has written), torn down."""
    await env.episodes.open(key, {})
    try:
        put = await call(env, key, "put", key="k", value=key)
        assert put.ok, put.error
        if barrier is None:
            await asyncio.sleep(pause)
        else:
            await barrier.wait()
        got = await call(env, key, "get", key="k")
        return key, got.observation if got.ok else f"error: {got.error}"
    finally:
        await env.episodes.close(key)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The kv server over streamable HTTP on 127.0.0.1, one store per MCP session."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(KV_SERVER), "--transport", "streamable-http", "--port", str(port)]
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, f"kv server exited with {proc.returncode}"
            try:
                with ToolExecutor([McpProvider("probe", McpServerConfig(url=url))]) as probe:
                    probe.execute([ToolCall("sessions", {})])
                break
            except Exception:
                assert time.monotonic() < deadline, "the kv server did not answer"
                time.sleep(0.2)
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=10)


def server_sessions(url: str) -> int:
    """Sessions the HTTP server holds open, not counting the one asking."""
    with ToolExecutor([McpProvider("probe", McpServerConfig(url=url))]) as probe:
        (record,) = probe.execute([ToolCall("sessions", {})])
    return int(record.observation) - 1


def server_session_ids(url: str) -> set[str]:
    """Ids of the sessions the HTTP server holds open, not counting the one asking."""
    with ToolExecutor([McpProvider("probe", McpServerConfig(url=url))]) as probe:
        ids, mine = probe.execute([ToolCall("session_ids", {}), ToolCall("session", {})])
    return set(ids.observation.splitlines()) - {mine.observation}


# -- configuration -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"command": "python", "scope": "episode"}, "scope"),
        ({"command": "python", "pool": 4}, "'pool' needs 'scope: trajectory'"),
        ({"command": "python", "reset_tool": "reset"}, "'reset_tool' needs 'scope: trajectory'"),
        ({"command": "python", "scope": "trajectory", "sessions": 2}, "'sessions' is for a shared server"),
        ({"command": "python", "scope": "trajectory", "pool": 0}, "pool"),
        ({"url": "http://127.0.0.1:1/mcp", "scope": "trajectory", "pool": 2}, "'pool' is for a stdio server"),
        (
            {"url": "http://127.0.0.1:1/mcp", "ready_sessions": 4},
            "'ready_sessions' needs 'scope: trajectory'",
        ),
        ({"url": "http://127.0.0.1:1/mcp", "scope": "trajectory", "ready_sessions": 0}, "ready_sessions"),
        (
            {"command": "python", "scope": "trajectory", "ready_sessions": 4},
            "'ready_sessions' is for a remote server",
        ),
    ],
)
def test_a_wrong_scope_field_stops_the_load_naming_it(tmp_path: Path, entry: dict, field: str) -> None:
    path = tmp_path / "env.yaml"
    path.write_text(json.dumps({"tools": {"mcp": {"mcpServers": {"kv": entry}}}}))
    with pytest.raises(EnvConfigError, match=field):
        Environment.load(path)


def test_a_reset_tool_the_server_does_not_offer_stops_the_start_naming_it(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="reset_tool names 'wipe'"):
        kv_env(tmp_path, stdio_entry(reset_tool="wipe"))
    assert kv_processes() == []


# -- isolation -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_grpo_group_writes_and_reads_its_own_state_concurrently(
    tmp_path: Path, transport: str, request: pytest.FixtureRequest
) -> None:
    entry = (
        stdio_entry(pool=8)
        if transport == "stdio"
        else {"url": request.getfixturevalue("http_url"), "scope": "trajectory"}
    )
    env = kv_env(tmp_path, entry)
    try:
        group = [f"g{i}" for i in range(8)]

        async def group_run() -> list[tuple[str, str]]:
            written = asyncio.Barrier(len(group))  # every member holds its lease until all have written
            return await asyncio.gather(*(write_then_read(env, key, barrier=written) for key in group))

        assert dict(run(group_run())) == {key: key for key in group}  # each read its own, never another's
        leases = provider(env).leases
        assert leases is not None and leases.leased == 0 and env.episodes.live == 0
        if transport == "stdio":
            assert len(set(provider(env).pids)) == 8  # one process each: the group was live at once
    finally:
        env.close()
    assert kv_processes() == []


def test_a_group_starting_at_once_takes_sessions_opened_before_it(tmp_path: Path, http_url: str) -> None:
    """``ready_sessions`` sessions are open on the server before a burst: each member of a group that starts
    at once takes one of them (its own), none waits for a handshake, and the unused ones close at the end."""
    others = server_session_ids(http_url)
    env = kv_env(tmp_path, {"url": http_url, "scope": "trajectory", "ready_sessions": 4})
    try:
        deadline = time.monotonic() + 60
        while len(ahead := server_session_ids(http_url) - others) < 4:
            assert time.monotonic() < deadline, f"{len(ahead)} sessions opened ahead, not ready_sessions (4)"
            time.sleep(0.1)

        async def member(key: str) -> str:
            await env.episodes.open(key, {})
            try:
                return (await call(env, key, "session")).observation
            finally:
                await env.episodes.close(key)

        async def burst() -> list[str]:
            return await asyncio.gather(*(member(f"b{i}") for i in range(4)))

        used = run(burst())
        assert len(set(used)) == 4 and set(used) <= ahead  # each its own, every one open before the burst
        assert not set(used) & server_session_ids(http_url)  # closed at each member's teardown
    finally:
        env.close()
    assert server_session_ids(http_url) - others == set()  # the sessions opened ahead since then too


def test_a_shared_server_is_what_the_group_shares(tmp_path: Path) -> None:
    """The same group on the default scope reads what the last writer wrote: the test above can fail."""
    env = kv_env(tmp_path, {"command": "python", "args": [str(KV_SERVER)]})
    try:

        async def group_run() -> list[tuple[str, str]]:
            async def one(key: str) -> tuple[str, str]:
                await call(env, key, "put", key="k", value=key)
                await asyncio.sleep(0.3)
                return key, (await call(env, key, "get", key="k")).observation

            return await asyncio.gather(*(one(f"g{i}") for i in range(4)))

        reads = dict(run(group_run()))
        assert len(set(reads.values())) == 1
    finally:
        env.close()


def test_the_reset_tool_empties_a_process_before_its_next_lease(tmp_path: Path) -> None:
    env = kv_env(tmp_path, stdio_entry(pool=1, reset_tool="reset"))
    try:

        async def two_in_a_row() -> list[tuple[int, str]]:
            seen = []
            for key in ("first", "second"):
                await env.episodes.open(key, {})
                pid = int((await call(env, key, "pid")).observation)
                before = (await call(env, key, "get", key="k")).observation
                await call(env, key, "put", key="k", value=key)
                await env.episodes.close(key)
                seen.append((pid, before))
            return seen

        (pid1, before1), (pid2, before2) = run(two_in_a_row())
        assert pid1 == pid2  # the same process, reset rather than restarted
        assert before1 == before2 == "<none>"  # the second never sees the first's value
    finally:
        env.close()
    assert kv_processes() == []


def test_without_a_reset_tool_a_process_is_restarted_before_its_next_lease(tmp_path: Path) -> None:
    env = kv_env(tmp_path, stdio_entry(pool=1))
    try:

        async def two_in_a_row() -> list[tuple[int, str]]:
            seen = []
            for key in ("first", "second"):
                await env.episodes.open(key, {})
                pid = int((await call(env, key, "pid")).observation)
                before = (await call(env, key, "get", key="k")).observation
                await call(env, key, "put", key="k", value=key)
                await env.episodes.close(key)
                seen.append((pid, before))
            return seen

        (pid1, before1), (pid2, before2) = run(two_in_a_row())
        assert pid1 != pid2 and not psutil.pid_exists(pid1) or psutil.Process(pid1).status() == "zombie"
        assert before1 == before2 == "<none>"
    finally:
        env.close()
    assert kv_processes() == []
