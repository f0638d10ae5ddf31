"""Recovery under load: calls in flight when a stdio server dies are re-run on the restarted server
together when the server was killed from outside, one at a time only when a call may have crashed it."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from swift_rlfactory.tools import Limits, ToolCall, ToolExecutor
from swift_rlfactory.tools.mcp import McpProvider
from tests.test_mcp import stdio, timed_batch

CALLS = 32


def one_second_calls() -> list[list[ToolCall]]:
    """32 trajectories of one one-second call each, told apart so that no cache could merge them."""
    return [[ToolCall("sleep", {"seconds": 1.0 + i / 1000})] for i in range(CALLS)]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("sessions", [1, 4])
def test_calls_in_flight_when_the_server_is_killed_all_come_back_within_3x_a_clean_batch(
    sessions: int,
) -> None:
    """32 one-second calls in flight, a server process SIGKILLed half-way: every call comes back (re-run,
    marked repeated) within three times the time of the same batch without the kill. Re-run one at a time,
    as after a crash a call may have caused, they would take 32 s (8 s for the 8 calls on one of 4
    processes). With one process the re-runs must wait for it to start again, which on a loaded machine
    alone may take seconds: the time the server took to start at first is allowed on top."""
    provider = McpProvider("slow", stdio(sessions))
    limits = Limits(call_timeout_s=60, retries=0)
    started = time.perf_counter()
    with ToolExecutor([provider], limits) as executor:
        executor.execute([ToolCall("echo", {"text": "warm-up"})])
        startup = time.perf_counter() - started if sessions == 1 else 0.0
        clean, records = timed_batch(executor, one_second_calls())
        assert all(r.ok for r in records), [r.error for r in records if not r.ok]
        pid = provider.pids[0]
        killer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
        killer.start()
        crashed, records = timed_batch(executor, one_second_calls())
        killer.join()
    failed = [r.error for r in records if not r.ok]
    assert not failed, failed
    assert all(r.observation == "slept" for r in records)
    rerun = [r for r in records if r.repeated]
    assert len(rerun) == CALLS // sessions and all(r.attempts == 2 for r in rerun)
    assert crashed < 3 * clean + startup, f"recovery took {crashed:.1f} s, a clean batch {clean:.1f} s"


@pytest.mark.timeout(180)
def test_a_poison_call_among_many_is_isolated_and_the_rest_come_back() -> None:
    """A call that makes its server exit (not a kill from outside) among 8 one-second calls: it fails after
    two crashes while alone on the server; the calls beside it come back, each run at most twice."""
    limits = Limits(call_timeout_s=60, retries=0)
    with ToolExecutor([McpProvider("slow", stdio())], limits) as executor:
        batch = one_second_calls()[:8]
        batch.insert(3, [ToolCall("crash", {})])
        elapsed, records = timed_batch(executor, batch)
    poison, innocent = records[3], records[:3] + records[4:]
    assert not poison.ok and "crashed 2 times" in poison.error, poison.error
    for record in innocent:
        assert record.ok and record.observation == "slept", record.error
        assert record.attempts == 2 and record.repeated
