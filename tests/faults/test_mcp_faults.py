"""MCP faults with real servers: restarts under a live session, poison calls, huge results, odd arguments.

Each test starts the servers it breaks (``tests/servers/slow_server.py`` over stdio or HTTP on 127.0.0.1)
and drives them through :class:`ToolExecutor`, the way training does.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from swift_rlfactory.tools import Limits, ToolCall, ToolExecutor
from swift_rlfactory.tools.mcp import McpProvider
from swift_rlfactory.tools.mcp.config import McpServerConfig
from tests.conftest import wait_for_port
from tests.test_mcp import ROOT, SLOW_SERVER, free_port, serve, stdio, timed_batch

RAW_SERVER = ROOT / "tests" / "servers" / "raw_server.py"


def start_http(port: int, *extra: str) -> subprocess.Popen:
    """The slow server over streamable HTTP on ``port``, once it accepts connections (killed if it never
    does)."""
    args = [sys.executable, str(SLOW_SERVER), "--transport", "streamable-http", "--port", str(port), *extra]
    proc = subprocess.Popen(args)
    try:
        wait_for_port(port, proc, timeout_s=30)
    except BaseException:
        stop(proc)
        raise
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def sse_url() -> Iterator[str]:
    yield from serve("sse", "/sse")


@pytest.mark.timeout(90)
def test_http_server_restart_reopens_the_session() -> None:
    """A redeployed server has forgotten our session id: the call reopens it instead of failing for good."""
    port = free_port()
    proc = start_http(port)
    config = McpServerConfig(url=f"http://127.0.0.1:{port}/mcp")
    try:
        with ToolExecutor([McpProvider("remote", config)], Limits(call_timeout_s=30)) as executor:
            first = executor.execute([ToolCall("pid", {})])[0]
            assert first.ok, first.error
            for _ in range(2):  # twice: healing must not be a one-off
                stop(proc)
                proc = start_http(port)
                again = executor.execute([ToolCall("pid", {})])[0]
                assert again.ok, again.error
                assert again.observation != first.observation  # a new server process answered
                assert again.attempts >= 2
                first = again
            assert executor.execute([ToolCall("echo", {"text": "alive"})])[0].observation == "alive"
    finally:
        stop(proc)


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("transport", "path"), [("streamable-http", "/mcp"), ("sse", "/sse")])
def test_calls_that_never_reached_a_down_server_are_no_repeats(
    transport: str, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    """While the server is down no session opens, so no try of a call reaches it: its retries are not
    marked ``repeated`` (they were, since every retry counted as one). The session's loss is told in words
    for a remote server, not with the hint about a stdio server's stderr."""
    port = free_port()
    proc = start_http(port, "--transport", transport)
    config = McpServerConfig(url=f"http://127.0.0.1:{port}{path}", transport=transport)
    limits = Limits(call_timeout_s=10, retries=2, retry_backoff_s=0.01)
    try:
        with ToolExecutor([McpProvider("down", config)], limits) as executor:
            assert executor.execute([ToolCall("echo", {"text": "up"})])[0].ok
            stop(proc)
            # The first call may find the session dead under it (the SDK cannot say if it was sent), but its
            # re-runs find no session to send it on: nothing ran it twice.
            first = executor.execute([ToolCall("echo", {"text": "first"})])[0]
            later = executor.execute([ToolCall("echo", {"text": "later"})])[0]
    finally:
        stop(proc)
    for record in (first, later):
        assert not record.ok and "unavailable" in (record.error or ""), record.error
        assert not record.repeated, record
    assert later.attempts == 3 and first.attempts >= 3
    said = [r.getMessage() for r in caplog.records if r.name == "swift_rlfactory.tools.mcp"]
    assert not any("stderr" in line for line in said), said
    if transport == "sse":  # the next call finds the session lost (streamable HTTP: that call or the session)
        assert any("lost (the connection to the server closed" in line for line in said), said


@pytest.mark.timeout(90)
def test_a_down_http_server_with_several_sessions_is_unreachable_not_crashed_by_the_call() -> None:
    """A streamable-HTTP server went down between calls, its provider holding two sessions. The next call's
    POST is refused on one session, its re-run's on the other: no server got either. They were counted as
    two crashes of the call alone, and the call failed for good as a poison call ("crashed 2 times ... the
    arguments may crash the server"), marked ``repeated``, never retried, though the server was only
    down; it must fail as unreachable, retried with back-off like any call to a server that is down."""
    port = free_port()
    proc = start_http(port)
    config = McpServerConfig(url=f"http://127.0.0.1:{port}/mcp", sessions=2)
    limits = Limits(call_timeout_s=10, retries=2, retry_backoff_s=0.01)
    try:
        with ToolExecutor([McpProvider("down", config)], limits) as executor:
            assert executor.execute([ToolCall("echo", {"text": "up"})])[0].ok
            stop(proc)
            record = executor.execute([ToolCall("echo", {"text": "down"})])[0]
    finally:
        stop(proc)
    assert not record.ok and "unavailable" in (record.error or ""), record.error
    assert not record.repeated and record.attempts >= 3, record


@pytest.mark.timeout(90)
def test_a_call_cut_by_a_server_death_is_a_repeat_once_a_retry_reaches_the_server_again() -> None:
    """The server dies under a running call and is down for the provider's own re-run; the executor's retry
    finds it back and runs the call again: it ran twice, and says so (its re-run that reached nothing must
    not make the retry look like a first run)."""
    import threading

    port = free_port()
    proc = start_http(port)
    config = McpServerConfig(url=f"http://127.0.0.1:{port}/mcp")
    limits = Limits(call_timeout_s=30, retries=4, retry_backoff_s=1.0)
    back: list[subprocess.Popen] = []

    def redeploy() -> None:
        time.sleep(1.0)  # the call is running
        stop(proc)
        time.sleep(0.5)  # down while the provider re-runs the call
        back.append(start_http(port))

    try:
        with ToolExecutor([McpProvider("redeployed", config)], limits) as executor:
            assert executor.execute([ToolCall("echo", {"text": "up"})])[0].ok
            thread = threading.Thread(target=redeploy)
            thread.start()
            record = executor.execute([ToolCall("sleep", {"seconds": 2})])[0]
            thread.join()
    finally:
        for server in [proc, *back]:
            stop(server)
    assert record.ok and record.observation == "slept", record.error
    assert record.repeated and record.attempts >= 3, record


@pytest.mark.timeout(90)
def test_a_call_sent_after_its_stdio_server_died_is_no_repeat_when_the_restart_runs_it() -> None:
    """The server process died between calls (killed, OOM): the next call finds its session closed before
    it was sent, so no process ever got it. The provider restarts the server and runs the call there: two
    attempts, but one run, so not ``repeated``; nor is it a poison call's crash."""
    import os
    import signal

    provider = McpProvider("killed", stdio())
    with ToolExecutor([provider], Limits(call_timeout_s=30, retries=2, retry_backoff_s=0.01)) as executor:
        assert executor.execute([ToolCall("echo", {"text": "up"})])[0].ok
        [pid] = provider.pids
        os.kill(pid, signal.SIGKILL)
        time.sleep(1.0)  # dead and its stdout closed, with no call in flight
        record = executor.execute([ToolCall("pid", {})])[0]
        assert record.ok and record.observation != str(pid), record.error
        assert (record.attempts, record.repeated) == (2, False), record
        assert provider.pids != [pid]
        # a call that was in flight when its server died still says it may have run twice
        batch = [[ToolCall("sleep", {"seconds": 0.5})], [ToolCall("crash", {})]]
        innocent = [r for rs in executor.execute_batch(batch) for r in rs][0]
        assert innocent.ok and innocent.repeated, innocent


@pytest.mark.timeout(120)
def test_poison_call_is_isolated_and_innocent_calls_rerun() -> None:
    """A call that crashes its server fails alone after two solo crashes; the calls in flight beside it
    are re-run (marked repeated, not charged the executor's retries), in ever smaller groups as the deaths
    go on, and succeed."""
    limits = Limits(call_timeout_s=60, retries=2, retry_backoff_s=0.05)
    with ToolExecutor([McpProvider("slow", stdio())], limits) as executor:
        batch = [[ToolCall("sleep", {"seconds": 0.5})] for _ in range(3)]
        batch.insert(1, [ToolCall("crash", {})])
        elapsed, records = timed_batch(executor, batch)
        poison = records[1]
        innocent = [r for i, r in enumerate(records) if i != 1]
        assert not poison.ok and "crashed 2 times" in poison.error, poison.error
        # two deaths beside all, the four halved to two (one death), to one (one death), alone once more
        assert poison.attempts == 5 and poison.repeated
        for record in innocent:
            assert record.ok and record.observation == "slept", record.error
            assert record.repeated
        # each ran, was re-run beside all, then ran in its half; the poison's neighbour in its quarter too
        assert [record.attempts for record in innocent] == [4, 3, 3]
        assert elapsed < 60
        assert executor.execute([ToolCall("echo", {"text": "after"})])[0].observation == "after"


@pytest.mark.timeout(90)
def test_hung_server_is_restarted() -> None:
    """A server whose event loop is stuck answers nothing yet stays alive: after a few timeouts in a row
    and an unanswered ping the session is restarted, so the calls after it work again."""
    with ToolExecutor([McpProvider("slow", stdio())], Limits(call_timeout_s=1, retries=0)) as executor:
        pid = executor.execute([ToolCall("pid", {})])[0].observation
        assert "timed out" in executor.execute([ToolCall("block", {})])[0].error
        deadline = time.monotonic() + 30
        while not (again := executor.execute([ToolCall("pid", {})])[0]).ok:
            assert "timed out" in again.error
            assert time.monotonic() < deadline, "the hung server was never restarted"
        assert again.observation != pid


@pytest.mark.timeout(60)
def test_slow_calls_on_a_live_server_do_not_restart_it() -> None:
    """Calls that time out on a server that still answers pings are the tools' fault: no restart."""
    with ToolExecutor([McpProvider("slow", stdio())], Limits(call_timeout_s=0.5, retries=0)) as executor:
        pid = executor.execute([ToolCall("pid", {})])[0].observation
        for _ in range(4):
            assert "timed out" in executor.execute([ToolCall("sleep", {"seconds": 30})])[0].error
        time.sleep(2)  # room for a probe and a restart, if one were (wrongly) started
        assert executor.execute([ToolCall("pid", {})])[0].observation == pid


@pytest.mark.timeout(60)
def test_lone_surrogate_arguments_are_sanitised() -> None:
    with ToolExecutor([McpProvider("slow", stdio())], Limits(call_timeout_s=20)) as executor:
        pid = executor.execute([ToolCall("pid", {})])[0].observation
        odd, fine = executor.execute(
            [ToolCall("echo", {"text": "a\ud83db"}), ToolCall("echo", {"text": "fine"})]
        )
        assert odd.ok and odd.observation == "a\ufffdb" and odd.attempts == 1, odd.error
        assert fine.ok and fine.attempts == 1
        assert executor.execute([ToolCall("pid", {})])[0].observation == pid  # no crash, no restart


@pytest.mark.timeout(60)
def test_huge_stdio_result_is_capped_without_blocking_the_session() -> None:
    config = McpServerConfig(command="python", args=[str(SLOW_SERVER)], max_result_mb=1)
    with ToolExecutor([McpProvider("slow", config)], Limits(call_timeout_s=30)) as executor:
        pid = executor.execute([ToolCall("pid", {})])[0].observation
        start = time.perf_counter()
        huge, small, echo = executor.execute(
            [
                ToolCall("big", {"megabytes": 24}),
                ToolCall("big", {"megabytes": 0.25}),
                ToolCall("echo", {"text": "hi"}),
            ]
        )
        assert time.perf_counter() - start < 20
        # 48 MB on the wire: the Python SDK sends the text twice (content and structuredContent).
        # The error says what the cap counts: the whole reply, which carries the text twice.
        assert not huge.ok and re.search(
            r"reply of \d+ MB exceeds max_result_mb \(1 MB, counted on the whole reply message", huge.error
        ), huge.error
        assert huge.attempts == 1
        assert small.ok and echo.observation == "hi"
        assert executor.execute([ToolCall("pid", {})])[0].observation == pid  # the session survived


@pytest.mark.timeout(60)
def test_a_ten_megabyte_result_passes_the_default_cap_and_is_cut_for_the_model() -> None:
    """The default max_result_mb (32) lets a 10 MB text through: 20 MB on the wire, as the SDK sends it
    twice. The model reads it cut to max_output_tokens."""
    config = McpServerConfig(command="python", args=[str(SLOW_SERVER)])
    with ToolExecutor([McpProvider("slow", config)], Limits(call_timeout_s=30, max_output_tokens=64)) as ex:
        [big] = ex.execute([ToolCall("big", {"megabytes": 10})])
    assert big.ok, big.error
    assert len(big.observation) <= 4 * 64 and "[truncated at least" in big.observation


@pytest.mark.timeout(60)
def test_undecodable_stdio_lines_are_answered_at_once() -> None:
    """A server that writes Latin-1 bytes or a lone surrogate escape still gets its text through (the bad
    characters become U+FFFD); a line that is no JSON at all fails its call at once, not at its timeout."""
    config = McpServerConfig(command="python", args=[str(RAW_SERVER)])
    with ToolExecutor([McpProvider("raw", config)], Limits(call_timeout_s=20, retries=0)) as executor:
        start = time.perf_counter()
        latin1, surrogate, garbled, ok = executor.execute(
            [ToolCall(name, {}) for name in ("latin1", "surrogate", "garbled", "ok")]
        )
        assert time.perf_counter() - start < 10
    assert latin1.ok and latin1.observation == "caf\ufffd cr\ufffdme", latin1.error
    assert surrogate.ok and surrogate.observation == "cut emoji \ufffd", surrogate.error
    assert not garbled.ok and "not a valid JSON-RPC message" in garbled.error, garbled.error
    assert ok.observation == "fine"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("body", ["event-stream", "json"])
def test_huge_http_result_is_capped(body: str) -> None:
    port = free_port()
    proc = start_http(port, *(["--json-response"] if body == "json" else []))
    try:
        config = McpServerConfig(url=f"http://127.0.0.1:{port}/mcp", max_result_mb=1)
        with ToolExecutor([McpProvider("remote", config)], Limits(call_timeout_s=30)) as executor:
            huge, echo = executor.execute(
                [ToolCall("big", {"megabytes": 8}), ToolCall("echo", {"text": "hi"})]
            )
            assert not huge.ok and "exceeds max_result_mb (1 MB, counted on the whole reply" in huge.error, (
                huge.error
            )
            assert echo.observation == "hi"
    finally:
        stop(proc)


@pytest.mark.timeout(60)
def test_url_only_server_falls_back_to_sse(sse_url: str) -> None:
    """No ``type``: streamable HTTP is tried first, and the old HTTP+SSE transport answers."""
    with ToolExecutor([McpProvider("legacy", McpServerConfig(url=sse_url))], Limits(call_timeout_s=20)) as ex:
        assert ex.execute([ToolCall("echo", {"text": "via sse"})])[0].observation == "via sse"


@pytest.mark.timeout(60)
def test_huge_sse_result_is_capped_alone(sse_url: str) -> None:
    """The legacy SSE transport honours ``max_result_mb`` too: a 1.5 MB reply (0.75 MB of text, sent twice)
    passes the SDK's fixed 1 MiB event limit, and a reply over the cap fails only its own call, at once,
    without killing the session, blaming the arguments or re-running the calls beside it."""
    config = McpServerConfig(url=sse_url, type="sse", max_result_mb=2)
    with ToolExecutor([McpProvider("legacy", config)], Limits(call_timeout_s=30, retries=0)) as executor:
        pid = executor.execute([ToolCall("pid", {})])[0].observation
        page, huge, echo = executor.execute(
            [
                ToolCall("big", {"megabytes": 0.75}),
                ToolCall("big", {"megabytes": 4}),
                ToolCall("echo", {"text": "hi"}),
            ]
        )
        assert page.ok and len(page.observation) > 1000, page.error
        assert not huge.ok and "reply of 8 MB exceeds max_result_mb (2 MB" in huge.error, huge.error
        assert huge.attempts == 1 and not huge.repeated
        assert echo.observation == "hi" and echo.attempts == 1 and not echo.repeated
        assert executor.execute([ToolCall("pid", {})])[0].observation == pid
