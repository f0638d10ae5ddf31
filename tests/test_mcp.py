"""The MCP tool backend against real servers: stdio subprocesses, streamable HTTP and SSE.

Every test talks to ``tests/servers/slow_server.py`` through :class:`ToolExecutor`, the way training does.
Servers that no test kills are shared per module; tests that need other limits or kill a server start
their own. Time bounds are generous for a loaded 2-core machine yet still tell parallel from serial.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from swift_rlfactory.env.config import load_env_config
from swift_rlfactory.tools import Limits, ToolCache, ToolCall, ToolExecutor
from swift_rlfactory.tools.mcp import McpProvider, mcp_providers
from swift_rlfactory.tools.mcp.config import McpServerConfig

from .conftest import wait_for_port

ROOT = Path(__file__).resolve().parents[1]
SLOW_SERVER = ROOT / "tests" / "servers" / "slow_server.py"
EXAMPLE = ROOT / "examples" / "unit_converter"


def stdio(sessions: int = 1) -> McpServerConfig:
    """A stdio entry for the slow server, as a user would write it in ``mcpServers``."""
    return McpServerConfig(command="python", args=[str(SLOW_SERVER)], sessions=sessions)


def sleeps(n: int, seconds: float = 0.5) -> list[list[ToolCall]]:
    """``n`` trajectories of one ``sleep`` call each."""
    return [[ToolCall("sleep", {"seconds": seconds})] for _ in range(n)]


def timed_batch(executor: ToolExecutor, batch: list[list[ToolCall]]) -> tuple[float, list]:
    start = time.perf_counter()
    records = [r for rs in executor.execute_batch(batch) for r in rs]
    return time.perf_counter() - start, records


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(transport: str, path: str) -> Iterator[str]:
    """Run the slow server over HTTP in a subprocess; yield its URL once it accepts connections."""
    port = free_port()
    args = [sys.executable, str(SLOW_SERVER), "--transport", transport, "--port", str(port)]
    proc = subprocess.Popen(args)
    try:
        wait_for_port(port, proc, timeout_s=30)
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    yield from serve("streamable-http", "/mcp")


@pytest.fixture(scope="module")
def sse_url() -> Iterator[str]:
    yield from serve("sse", "/sse")


@pytest.fixture(scope="module")
def stdio_executor() -> Iterator[ToolExecutor]:
    with ToolExecutor([McpProvider("slow", stdio(sessions=4))], Limits(call_timeout_s=10)) as executor:
        executor.execute([ToolCall("echo", {"text": "warm-up"})])
        yield executor


@pytest.fixture(scope="module")
def http_executor(http_url: str) -> Iterator[ToolExecutor]:
    config = McpServerConfig(url=http_url, sessions=2)
    with ToolExecutor([McpProvider("remote", config)], Limits(call_timeout_s=10)) as executor:
        executor.execute([ToolCall("echo", {"text": "warm-up"})])
        yield executor


# -- parallelism and limits --------------------------------------------------------------------------
def test_stdio_sessions_run_calls_in_parallel(stdio_executor: ToolExecutor) -> None:
    elapsed, records = timed_batch(stdio_executor, sleeps(64))
    assert all(r.ok and r.observation == "slept" for r in records)
    # serial: 32 s; 4 s still proves 8-way parallelism on a loaded 2-core machine (1.502 s seen against 1.5)
    assert elapsed < 4.0, f"64 x sleep(0.5) took {elapsed:.2f} s"


def test_calls_spread_over_all_sessions(stdio_executor: ToolExecutor) -> None:
    records = stdio_executor.execute([ToolCall("pid", {})] * 16)
    assert len({r.observation for r in records}) == 4  # four server processes, each given calls


def test_a_servers_state_is_shared_by_the_episodes_of_a_run(stdio_executor: ToolExecutor) -> None:
    """What the module docstring of ``tools.mcp`` and the README say: one server serves every trajectory,
    so a counter one episode bumps is bumped for all of them, and with several sessions the calls of one
    episode may even reach different processes, each with its own count."""
    with ToolExecutor([McpProvider("one", stdio())], Limits(call_timeout_s=10)) as shared:
        records = shared.execute_batch([[ToolCall("count", {"key": "episode-state"})] for _ in range(3)])
    assert sorted(int(r.observation) for [r] in records) == [1, 2, 3]
    first, second = stdio_executor.execute([ToolCall("count", {"key": "spread-state"})] * 2)
    assert (first.observation, second.observation) == ("1", "1")  # two processes, two counters


# Over HTTP each call costs a few ms of CPU in the SDK on both sides (a POST answered by an SSE stream), which a
# loaded 2-core machine stretches to ~1.5 s for 64 calls; 3 s still proves > 10-way parallelism (serial: 32 s).
HTTP_BOUND_S = 3.0


def test_http_server_runs_calls_in_parallel(http_executor: ToolExecutor) -> None:
    elapsed, records = timed_batch(http_executor, sleeps(64))
    assert all(r.ok and r.observation == "slept" for r in records)
    assert elapsed < HTTP_BOUND_S, f"64 x sleep(0.5) took {elapsed:.2f} s"


def test_sse_server(sse_url: str) -> None:
    config = McpServerConfig(url=sse_url, transport="sse")
    with ToolExecutor([McpProvider("legacy", config)], Limits(call_timeout_s=10)) as executor:
        assert executor.execute([ToolCall("echo", {"text": "over sse"})])[0].observation == "over sse"
        elapsed, records = timed_batch(executor, sleeps(16))
    assert all(r.ok for r in records)
    assert elapsed < HTTP_BOUND_S, f"16 x sleep(0.5) took {elapsed:.2f} s"


def test_per_tool_limit_bounds_concurrency(http_url: str) -> None:
    limits = Limits(call_timeout_s=20, per_tool_concurrency={"sleep": 4})
    with ToolExecutor([McpProvider("remote", McpServerConfig(url=http_url, sessions=4))], limits) as executor:
        elapsed, records = timed_batch(executor, sleeps(64))
    assert all(r.ok for r in records)
    assert 7.5 <= elapsed < 10, f"64 x sleep(0.5), 4 at a time, took {elapsed:.2f} s (expected ~8)"


def test_hung_call_times_out_alone() -> None:
    with ToolExecutor([McpProvider("slow", stdio())], Limits(call_timeout_s=1)) as executor:
        batch = [[ToolCall("sleep", {"seconds": 30})], *sleeps(8, 0.2), [ToolCall("echo", {"text": "hi"})]]
        elapsed, records = timed_batch(executor, batch)
    hung, *rest = records
    assert not hung.ok and "timed out" in hung.error and hung.observation.startswith("Error:")
    assert 1 <= hung.latency_s < 3
    assert all(r.ok for r in rest) and rest[-1].observation == "hi"
    assert elapsed < 5


# -- fault tolerance ---------------------------------------------------------------------------------
def test_killed_server_is_restarted() -> None:
    with ToolExecutor([McpProvider("slow", stdio())], Limits(retry_backoff_s=0.1)) as executor:
        first = executor.execute([ToolCall("pid", {})])[0]
        os.kill(int(first.observation), signal.SIGKILL)
        again = executor.execute([ToolCall("pid", {})])[0]
        assert again.ok, again.error
        assert again.attempts == 2  # the dead session failed the first attempt; the retry met the new server
        assert again.observation != first.observation
        assert executor.execute([ToolCall("echo", {"text": "still here"})])[0].observation == "still here"


def test_server_that_cannot_start_is_named() -> None:
    config = McpServerConfig(command="python", args=["-c", "raise SystemExit(3)"], startup_timeout_s=10)
    executor = ToolExecutor([McpProvider("broken", config)])
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="MCP server 'broken' .*failed to start"):
        executor.start()
    assert time.perf_counter() - start < 10
    executor.close()


RESOURCES_ONLY_SERVER = """
import anyio
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.types import ListResourcesResult, Resource

async def resources(ctx, params):
    return ListResourcesResult(resources=[Resource(name="notes", uri="file:///notes.txt")])

server = Server("notes", on_list_resources=resources)  # no tool handler: no tools capability

async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"""


def test_a_server_without_the_tools_capability_starts_with_no_tools(tmp_path: Path) -> None:
    """A resources- or prompts-only server answers tools/list with "method not found" (the specification
    lets it); it is not asked, and the other servers' tools work beside it."""
    (tmp_path / "notes.py").write_text(RESOURCES_ONLY_SERVER)
    notes = McpProvider("notes", McpServerConfig(command="python", args=[str(tmp_path / "notes.py")]))
    with ToolExecutor([notes, McpProvider("slow", stdio())]) as executor:
        assert "echo" in executor.tools and not [t for t in executor.tools if "notes" in t]
        assert executor.execute([ToolCall("echo", {"text": "beside it"})])[0].observation == "beside it"


def test_silent_server_times_out_at_start() -> None:
    config = McpServerConfig(
        command="python", args=["-c", "import time; time.sleep(60)"], startup_timeout_s=1
    )
    executor = ToolExecutor([McpProvider("mute", config)])
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="MCP server 'mute' .*failed to start.*within 1 s"):
        executor.start()
    executor.close()
    assert time.perf_counter() - start < 8  # 1 s to give up, then the SDK's bounded SIGTERM escalation


def test_unreachable_url_is_named() -> None:
    config = McpServerConfig(url=f"http://127.0.0.1:{free_port()}/mcp", startup_timeout_s=10)
    executor = ToolExecutor([McpProvider("nowhere", config)])
    with pytest.raises(RuntimeError, match="MCP server 'nowhere' .*failed to start.*ConnectError"):
        executor.start()
    executor.close()


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie awaiting its parent's wait does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            return False
    return True


def test_close_is_idempotent() -> None:
    provider = McpProvider("slow", stdio(sessions=2))

    async def start_and_close_twice() -> None:
        await provider.start()
        pids = provider.pids
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        await asyncio.wait_for(provider.close(), 15)
        # Checked before the loop ends: asyncio.run's teardown would cancel a leaked owner and hide it.
        assert not [pid for pid in pids if alive(pid)], "close() left server processes running"
        await asyncio.wait_for(provider.close(), 15)
        assert provider.pids == []

    asyncio.run(start_and_close_twice())


# -- results and errors ------------------------------------------------------------------------------
def test_errors_become_observations(stdio_executor: ToolExecutor) -> None:
    failed, unknown, unparsed = stdio_executor.execute(
        [ToolCall("fail", {"message": "no such city"}), ToolCall("teleport"), ToolCall("", error="bad JSON")]
    )
    assert not failed.ok and "no such city" in failed.observation and failed.attempts == 1
    assert not unknown.ok and "unknown tool 'teleport'" in unknown.observation
    assert not unparsed.ok and "bad JSON" in unparsed.observation


def test_dict_result_renders_as_json(stdio_executor: ToolExecutor) -> None:
    record = stdio_executor.execute([ToolCall("shape", {})])[0]
    assert record.ok, record.error
    assert json.loads(record.observation)["size"] == {"w": 1.5, "h": 1.5}


def test_a_value_the_server_wrapped_as_structured_content_reads_as_the_value(
    stdio_executor: ToolExecutor,
) -> None:
    """Python SDK and FastMCP servers send a tool's return value that is no object (``None``, a list) as
    structuredContent ``{"result": value}``, with text content beside it, except when that is empty: a
    search with no hits or a lookup of nothing then read ``{"result": []}`` and ``{"result": null}``, a
    wrapper the model sees nowhere else (a list with hits reads as its lines). The value reads as itself,
    as a Python tool's ``[]`` or ``None`` does: nothing."""
    empty, none = stdio_executor.execute(
        [ToolCall("find", {"key": "x"}), ToolCall("find", {"key": "x", "many": False})]
    )
    assert empty.ok and none.ok, (empty.error, none.error)
    assert (empty.observation, none.observation) == ("", "")


def test_schemas_are_the_servers_own(stdio_executor: ToolExecutor) -> None:
    spec = importlib.util.spec_from_file_location("slow_server", SLOW_SERVER)
    server = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(server)
    truth = {t.name: t for t in asyncio.run(server.mcp.list_tools())}
    shown = {s["function"]["name"]: s["function"] for s in stdio_executor.schemas()}
    assert (
        set(shown)
        == set(truth)
        == {"sleep", "echo", "pid", "fail", "count", "shape", "find", "crash", "block", "big", "getenv"}
    )
    for name, fn in shown.items():
        assert fn["parameters"] == truth[name].input_schema
        assert fn["description"] == truth[name].description


def test_clashing_tool_names_are_prefixed(http_url: str) -> None:
    providers = [McpProvider("local", stdio()), McpProvider("remote", McpServerConfig(url=http_url))]
    with ToolExecutor(providers) as executor:
        assert {"echo", "remote_echo"} <= set(executor.tools)
        assert [s["function"]["name"] for s in executor.schemas()].count("remote_echo") == 1
        local, remote = executor.execute(
            [ToolCall("echo", {"text": "a"}), ToolCall("remote_echo", {"text": "b"})]
        )
        assert (local.observation, remote.observation) == ("a", "b")
        pids = executor.execute([ToolCall("pid", {}), ToolCall("remote_pid", {})])
        assert pids[0].observation != pids[1].observation  # really two servers


def test_cache_runs_identical_calls_once(http_url: str, http_executor: ToolExecutor) -> None:
    provider = McpProvider("remote", McpServerConfig(url=http_url, sessions=2))
    with ToolExecutor([provider], cache=ToolCache(), cached_tools={"count"}) as executor:
        records = executor.execute([ToolCall("count", {"key": "cached"})] * 16)
    assert [r.observation for r in records] == ["1"] * 16
    assert sum(r.cache_hit for r in records) == 15
    # The server saw one call: its counter, asked without the cache, moves from 1 to 2.
    assert http_executor.execute([ToolCall("count", {"key": "cached"})])[0].observation == "2"


# -- the example environment -------------------------------------------------------------------------
def test_unit_converter_example() -> None:
    config = load_env_config(EXAMPLE / "env.yaml")
    servers = config.mcp_servers()
    assert servers.mcpServers["units"].cwd == str(EXAMPLE)
    assert config.cache.tools == ["convert"]
    with ToolExecutor(mcp_providers(servers), config.limits.executor_limits()) as executor:
        assert set(executor.tools) == {"convert", "list_units"}
        miles, bad = executor.execute(
            [
                ToolCall("convert", {"value": 5, "from_unit": "km", "to_unit": "mi"}),
                ToolCall("convert", {"value": 1, "from_unit": "kg", "to_unit": "m"}),
            ]
        )
    assert float(miles.observation) == pytest.approx(3.10686, rel=1e-5)
    assert not bad.ok and "cannot convert mass" in bad.observation


ROOTS_SERVER = ROOT / "tests" / "servers" / "roots_server.py"


def test_servers_are_told_the_environments_folder_as_their_root(tmp_path: Path) -> None:
    """The client answers ``roots/list`` with the environment's folder as a ``file://`` URI, as an editor
    offers its workspace: server-filesystem started without a folder argument works on it (it waited for
    roots, then denied every access). A provider made without roots advertises none."""
    from swift_rlfactory.env.environment import Environment

    folder = tmp_path / "my env"  # a space, to see the URI quoted
    folder.mkdir()
    (folder / "env.yaml").write_text(
        f"tools:\n  mcp:\n    mcpServers:\n      fs: {{command: python, args: ['{ROOTS_SERVER}']}}\n"
    )
    with Environment.load(folder / "env.yaml") as env:
        (record,) = env.executor.execute([ToolCall("roots", {})])
    assert record.observation == f"{folder.resolve().as_uri()} my env", record.observation
    assert "%20" in record.observation

    bare = McpProvider("fs", McpServerConfig(command="python", args=[str(ROOTS_SERVER)]))
    with ToolExecutor([bare]) as executor:
        (record,) = executor.execute([ToolCall("roots", {})])
    assert record.observation.startswith("no roots:"), record.observation


def test_a_server_started_on_folders_is_told_those_folders_as_its_roots(tmp_path: Path) -> None:
    """A stdio server whose command line names folders (``server-filesystem /data/corpus``, as every client's
    README writes it) is told those folders as its roots, not the environment's folder: server-filesystem
    lets roots replace its command-line folders, so the model was denied the folder the user named and
    given the environment's own (its data, its reward code) instead. Relative folders count from the
    server's ``cwd``; flags, files and words that are no path are no roots."""
    from swift_rlfactory.env.environment import Environment

    env_dir, corpus, extra = tmp_path / "env", tmp_path / "corpus", tmp_path / "env" / "extra"
    extra.mkdir(parents=True)
    corpus.mkdir()
    long = "x" * 300  # no file name can be this long: is_dir() raises rather than answer
    args = f"['{ROOTS_SERVER}', --verbose, '{corpus}', extra, env.yaml, missing, {long}, '~no_such_user_q/x']"
    (env_dir / "env.yaml").write_text(
        f"tools:\n  mcp:\n    mcpServers:\n      fs: {{command: python, args: {args}}}\n"
    )
    with Environment.load(env_dir / "env.yaml") as env:
        (record,) = env.executor.execute([ToolCall("roots", {})])
    assert record.observation.splitlines() == [f"{corpus.as_uri()} corpus", f"{extra.as_uri()} extra"]


def test_a_server_entry_names_its_own_roots_checked_at_load(tmp_path: Path, monkeypatch) -> None:
    """``roots:`` in a server entry replaces the environment's folder: paths (relative to it, ``~``,
    ``${VAR}``) or ``file://`` URIs, in order; ``roots: []`` advertises none. A root that is not a folder
    stops the environment's load naming the server and the field, before any server starts."""
    from swift_rlfactory.env.config import EnvConfigError
    from swift_rlfactory.env.environment import Environment

    data, other = tmp_path / "data", tmp_path / "other"
    data.mkdir()
    other.mkdir()
    monkeypatch.setenv("OTHER_ROOT", str(other))

    def env_with(roots: str) -> Path:
        server = f"{{command: python, args: ['{ROOTS_SERVER}'], roots: {roots}}}"
        (tmp_path / "env.yaml").write_text(f"tools:\n  mcp:\n    mcpServers:\n      fs: {server}\n")
        return tmp_path / "env.yaml"

    with Environment.load(env_with(f"[data, '${{OTHER_ROOT}}', '{tmp_path.as_uri()}']")) as env:
        (record,) = env.executor.execute([ToolCall("roots", {})])
    assert record.observation.splitlines() == [
        f"{data.as_uri()} data",
        f"{other.as_uri()} other",
        f"{tmp_path.as_uri()} {tmp_path.name}",
    ], record.observation
    with Environment.load(env_with("[]")) as env:
        (record,) = env.executor.execute([ToolCall("roots", {})])
    assert record.observation.startswith("no roots:"), record.observation
    for roots, message in [
        ("[data, missing]", rf"MCP server 'fs': roots\[1\]: folder {tmp_path / 'missing'} does not exist"),
        ("[env.yaml]", r"MCP server 'fs': roots\[0\]: .*env\.yaml is not a folder"),
        ("[{uri: x}]", r"roots\.0"),
        ("['http://host/x']", r"MCP server 'fs': roots\[0\]: .*not a folder path or a file:// URI"),
    ]:
        with pytest.raises(EnvConfigError, match=message):
            load_env_config(env_with(roots)).mcp_servers()


# -- tool lists that change during the run ----------------------------------------------------------
CHANGING_SERVER = ROOT / "tests" / "servers" / "changing_server.py"


def changing(sessions: int, include: list[str] | None = None) -> ToolExecutor:
    config = McpServerConfig(
        command="python", args=[str(CHANGING_SERVER)], sessions=sessions, include_tools=include
    )
    return ToolExecutor([McpProvider("doors", config)], Limits(call_timeout_s=10, retries=0))


@pytest.mark.timeout(60)
def test_a_tool_the_server_adds_at_runtime_can_be_called_on_the_process_that_offers_it() -> None:
    """A tool the server enables during the run (it sends ``notifications/tools/list_changed``) is not in
    the prompt, which was rendered at start, but a call to it works, on the server process that offers it:
    with two processes, ``unlock`` adds ``secret`` to one of them only, and every call goes there."""
    with changing(sessions=2) as executor:
        (before,) = executor.execute([ToolCall("secret", {})])
        assert not before.ok and "unknown tool 'secret'" in before.observation
        (unlocked,) = executor.execute([ToolCall("unlock", {})])
        assert unlocked.observation == "unlocked", unlocked.error
        records = executor.execute([ToolCall("secret", {})] * 6)
        assert [r.observation for r in records] == ["open sesame"] * 6, [r.error for r in records]
        assert sorted(executor.tools) == ["echo", "retire", "unlock"]  # the prompt's tools stay as they were
    with changing(sessions=1, include=["unlock"]) as executor:  # an allowlist holds for later tools too
        executor.execute([ToolCall("unlock", {})])
        (hidden,) = executor.execute([ToolCall("secret", {})])
    assert not hidden.ok and "unknown tool 'secret'" in hidden.error, hidden.error


@pytest.mark.timeout(60)
def test_a_tool_the_server_removed_reads_as_no_longer_offered() -> None:
    """A tool the server takes away during the run is still in the prompt; with another process still
    offering it the calls go there, and once none does the model reads that the server no longer offers
    it, not the server's own "Unknown tool" error."""
    with changing(sessions=2) as executor:
        (retired,) = executor.execute([ToolCall("retire", {})])
        assert retired.observation == "retired", retired.error
        records = executor.execute([ToolCall("echo", {"text": "hi"})] * 6)
        assert [r.observation for r in records] == ["hi"] * 6, [r.error for r in records]
    with changing(sessions=1) as executor:
        executor.execute([ToolCall("retire", {})])
        (gone,) = executor.execute([ToolCall("echo", {"text": "hi"})])
    assert not gone.ok and "MCP server 'doors' no longer offers tool 'echo'" in gone.error, gone.error
