"""Per-trajectory MCP servers under failure and at scale, against real servers.

A leased process that dies mid-trajectory (its trajectory is told its state was lost, the call is not run
again, no other trajectory is touched), a full pool (a trajectory waits, and past ``lease_timeout_s`` gets
an error observation), calls outside any live trajectory, the UI's scratch episode, 64 trajectories at
once and 500 in a row: after each, 0 server processes, 0 sessions the server holds open, 0 temp files.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from swift_rlfactory.env.environment import Environment
from swift_rlfactory.rollout.episode import Generation, run_episode
from swift_rlfactory.tools.mcp.leases import TrajectoryLeases

from ..test_mcp_scope import (
    call,
    http_url,  # noqa: F401 - the module's HTTP kv server
    kv_env,
    kv_processes,
    provider,
    run,
    server_sessions,
    stdio_entry,
    write_then_read,
)

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def tmpdir_of_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp folder of their own for the servers (``TMPDIR`` passes through to stdio servers)."""
    folder = tmp_path / "server-tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


async def together(env: Environment, keys: list[str], pause: float = 0.05) -> list[tuple[str, str]]:
    """The trajectories ``keys`` at once, each writing its own value and reading it back."""
    return await asyncio.gather(*(write_then_read(env, key, pause) for key in keys))


def opened_ahead(leases: TrajectoryLeases, url: str) -> tuple[int, int]:
    """(sessions open or opening, sessions the HTTP server holds) once the sessions opened ahead, which open
    a few at a time, have all opened (within 60 s)."""
    deadline = time.monotonic() + 60
    while server_sessions(url) < leases.config.ready_size and time.monotonic() < deadline:
        time.sleep(0.1)
    return leases.open_sessions, server_sessions(url)


# -- a leased server that dies -------------------------------------------------------------------------
def test_a_leased_process_that_dies_loses_only_its_trajectorys_state_and_says_so(tmp_path: Path) -> None:
    env = kv_env(tmp_path, stdio_entry(pool=2))
    try:

        async def scenario() -> dict:
            await env.episodes.open("dies", {})
            await env.episodes.open("lives", {})
            await call(env, "dies", "put", key="k", value="dies")
            await call(env, "lives", "put", key="k", value="lives")
            first = int((await call(env, "dies", "pid")).observation)
            crashed = await call(env, "dies", "crash")
            after = await call(env, "dies", "get", key="k")
            second = int((await call(env, "dies", "pid")).observation)
            other = await call(env, "lives", "get", key="k")
            for key in ("dies", "lives"):
                await env.episodes.close(key)
            return {"first": first, "crashed": crashed, "after": after, "second": second, "other": other}

        seen = run(scenario())
        crashed = seen["crashed"]
        assert not crashed.ok and "lost this trajectory's session" in crashed.error
        assert "what this trajectory had stored on it is gone" in crashed.error
        assert "not run again" in crashed.error and crashed.attempts == 1  # the healing did not re-run it
        assert seen["after"].observation == "<none>"  # a clean restart: nobody's state, its own included
        assert seen["second"] != seen["first"]
        assert seen["other"].observation == "lives"  # the other trajectory never noticed
    finally:
        env.close()
    assert kv_processes() == []


def test_a_process_killed_between_calls_is_restarted_and_the_next_call_says_the_state_was_lost(
    tmp_path: Path,
) -> None:
    env = kv_env(tmp_path, stdio_entry(pool=1))
    try:

        async def scenario() -> tuple:
            await env.episodes.open("t", {})
            await call(env, "t", "put", key="k", value="v")
            pid = int((await call(env, "t", "pid")).observation)
            os.kill(pid, 9)
            await asyncio.sleep(0.5)  # the client sees the pipe close
            lost = await call(env, "t", "get", key="k")
            again = await call(env, "t", "get", key="k")
            await env.episodes.close("t")
            return lost, again

        lost, again = run(scenario())
        assert not lost.ok and "lost this trajectory's session" in lost.error
        assert again.ok and again.observation == "<none>"
    finally:
        env.close()
    assert kv_processes() == []


# -- a full pool ---------------------------------------------------------------------------------------
def test_a_trajectory_waits_for_a_process_given_back(tmp_path: Path) -> None:
    env = kv_env(tmp_path, stdio_entry(pool=1, reset_tool="reset", lease_timeout_s=20))
    try:

        async def scenario() -> tuple[str, float]:
            await env.episodes.open("holder", {})
            await env.episodes.open("waiter", {})
            await call(env, "holder", "put", key="k", value="holder")

            async def give_back_soon() -> None:
                await asyncio.sleep(0.5)
                await env.episodes.close("holder")

            started = time.perf_counter()
            release = asyncio.create_task(give_back_soon())
            got = await call(env, "waiter", "get", key="k")
            waited = time.perf_counter() - started
            await release
            await env.episodes.close("waiter")
            return got.observation, waited

        observation, waited = run(scenario())
        assert observation == "<none>" and waited >= 0.4  # it waited, then got the process reset
        assert len(provider(env).pids) == 1  # the pool never grew past its size
    finally:
        env.close()


def test_a_trajectory_that_waits_past_lease_timeout_gets_an_error_and_no_hang(tmp_path: Path) -> None:
    env = kv_env(tmp_path, stdio_entry(pool=1, reset_tool="reset", lease_timeout_s=1))
    try:

        async def scenario() -> tuple:
            await env.episodes.open("holder", {})
            await env.episodes.open("waiter", {})
            await call(env, "holder", "put", key="k", value="holder")
            started = time.perf_counter()
            refused = await call(env, "waiter", "get", key="k")
            waited = time.perf_counter() - started
            await env.episodes.close("holder")
            later = await call(env, "waiter", "get", key="k")  # the pool has room again
            await env.episodes.close("waiter")
            return refused, waited, later

        refused, waited, later = run(scenario())
        assert not refused.ok and "all 1 processes of its pool stayed leased" in refused.error
        assert "lease_timeout_s" in refused.error and 0.9 <= waited < 10
        assert later.ok and later.observation == "<none>"
    finally:
        env.close()
    assert kv_processes() == []


# -- calls outside a live trajectory -------------------------------------------------------------------
def test_a_call_outside_any_live_trajectory_is_an_error_and_takes_no_session(tmp_path: Path) -> None:
    env = kv_env(tmp_path, stdio_entry(pool=1))
    try:

        async def scenario() -> tuple:
            outside = await env.call_tool("get", {"key": "k"})
            await env.episodes.open("t", {})
            await env.episodes.close("t")
            late = await env.call_tool("get", {"key": "k"}, {}, "t")  # a late call of an ended trajectory
            return outside, late

        outside, late = run(scenario())
        for record in (outside, late):
            assert not record.ok and "belongs to no live trajectory" in record.error
        leases = provider(env).leases
        assert leases is not None and leases.leased == 0
    finally:
        env.close()


def test_try_a_tool_runs_in_a_scratch_episode_released_after_the_call(tmp_path: Path) -> None:
    env = kv_env(tmp_path, stdio_entry(pool=1, reset_tool="reset"))
    try:
        assert env.episodes.enabled and env.episodes.config is not None  # no episode: in the file
        assert env.try_tool("put", {"key": "k", "value": "v"}).ok
        assert env.try_tool("get", {"key": "k"}).observation == "<none>"  # a fresh scratch episode
        leases = provider(env).leases
        assert leases is not None and leases.leased == 0 and env.episodes.live == 0
    finally:
        env.close()
    assert kv_processes() == []


def test_results_of_a_per_trajectory_server_are_never_cached(tmp_path: Path) -> None:
    path = tmp_path / "env.yaml"
    env = kv_env(tmp_path, stdio_entry(pool=2))
    env.close()
    text = path.read_text().replace('"limits"', '"cache": {"tools": ["*"]}, "limits"')
    path.write_text(text)
    env = Environment.load(path).start()
    try:
        reads = dict(run(together(env, ["a", "b"], pause=0.1)))
        assert reads == {"a": "a", "b": "b"}
        assert env.executor.cache is not None  # the cache is on, and still each read its own
    finally:
        env.close()


# -- at scale: count what is left ----------------------------------------------------------------------
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_64_concurrent_trajectories_leave_no_process_session_or_temp_file(
    tmp_path: Path, transport: str, request: pytest.FixtureRequest, tmpdir_of_servers: Path
) -> None:
    url = request.getfixturevalue("http_url") if transport == "http" else None
    entry = stdio_entry(pool=8, reset_tool="reset") if url is None else {"url": url, "scope": "trajectory"}
    env = kv_env(tmp_path, entry, call_timeout_s=120)
    keys = [f"t{i}" for i in range(64)]
    try:
        reads = dict(run(together(env, keys)))
        assert reads == {key: key for key in keys}
        leases = provider(env).leases
        assert leases is not None and leases.leased == 0 and env.episodes.live == 0
        if url is not None:  # the sessions opened ahead for the next trajectories are all that is left
            ahead = leases.config.ready_size
            assert opened_ahead(leases, url) == (ahead, ahead)
        else:
            assert len(provider(env).pids) <= 8  # the pool bounds the processes
    finally:
        env.close()
    assert kv_processes() == []
    assert list(tmpdir_of_servers.iterdir()) == []
    if url is not None:
        assert server_sessions(url) == 0


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_500_short_trajectories_leave_nothing_behind(
    tmp_path: Path, transport: str, request: pytest.FixtureRequest, tmpdir_of_servers: Path
) -> None:
    url = request.getfixturevalue("http_url") if transport == "http" else None
    entry = stdio_entry(pool=8, reset_tool="reset") if url is None else {"url": url, "scope": "trajectory"}
    env = kv_env(tmp_path, entry, call_timeout_s=120)
    try:

        async def waves() -> dict[str, str]:
            reads: dict[str, str] = {}
            for wave in range(25):  # 25 waves of 20 trajectories at once
                keys = [f"w{wave}-{i}" for i in range(20)]
                reads.update(await together(env, keys, pause=0))
            return reads

        reads = run(waves())
        assert len(reads) == 500 and all(key == value for key, value in reads.items())
        leases = provider(env).leases
        assert leases is not None and leases.leased == 0 and env.episodes.live == 0
        if url is not None:  # the sessions opened ahead for the next trajectories are all that is left
            ahead = leases.config.ready_size
            assert opened_ahead(leases, url) == (ahead, ahead)
    finally:
        env.close()
    assert kv_processes() == []
    assert list(tmpdir_of_servers.iterdir()) == []
    if url is not None:
        assert server_sessions(url) == 0


def test_the_eval_loop_gives_each_episode_and_its_reward_its_own_session() -> None:
    """run_episode inside Episodes.scope, as ``swift-rlfactory eval`` runs it: the turns and the
    tool-verified reward (``trajectory.call_tool``) reach the episode's own process, released after."""
    env_path = Path(__file__).parent / "kv_scope_env" / "env.yaml"

    def script(me: str):
        replies = iter([("put", {"key": "k", "value": me}), ("get", {"key": "k"}), None])

        async def generate(messages):
            await asyncio.sleep(0.05)  # the group's turns interleave
            step = next(replies)
            if step is None:
                return Generation("<answer>done</answer>")
            name, arguments = step
            return Generation(
                f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
            )

        return generate

    async def one(env: Environment, me: str):
        async with env.episodes.scope(me, {"me": me}) as state:
            trajectory = await run_episode(
                [{"role": "user", "content": "go"}], script(me), env.executor, 4, row={"me": me},
                state=state, episode=me,
            )  # fmt: skip
            trajectory.tool_env = env
            await env.reward.ascore([trajectory])
        return me, trajectory

    async def group(env: Environment):
        return await asyncio.gather(*(one(env, f"e{i}") for i in range(6)))

    with Environment.load(env_path) as env:
        for me, trajectory in asyncio.run(group(env)):
            reads = [c["observation"] for c in trajectory.tool_calls if c["tool"] == "get"]
            assert reads == [me] and trajectory.rewards["total"] == 1.0, (me, trajectory.tool_calls)
            assert trajectory.state == {}
        leases = provider(env).leases
        assert leases is not None and leases.leased == 0 and env.episodes.live == 0
