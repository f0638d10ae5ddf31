"""Recovery under load: calls in flight when a stdio server dies (killed from outside or exiting by itself)
are re-run together on the restarted server; a call that crashes it each time is found by halving groups
of suspects while the innocent calls keep running together."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from swift_rlfactory.tools import Limits, ToolCall, ToolExecutor
from swift_rlfactory.tools.mcp import McpProvider
from swift_rlfactory.tools.mcp.config import McpServerConfig
from tests.test_mcp import ROOT, stdio, timed_batch

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
    two crashes while alone on the server; the calls beside it come back, each run at most 2 + log2(9)
    times rounded up (its first run, the re-run beside all, one run in each group it was halved into)."""
    limits = Limits(call_timeout_s=60, retries=0)
    with ToolExecutor([McpProvider("slow", stdio())], limits) as executor:
        batch = one_second_calls()[:8]
        batch.insert(3, [ToolCall("crash", {})])
        elapsed, records = timed_batch(executor, batch)
    poison, innocent = records[3], records[:3] + records[4:]
    assert not poison.ok and "crashed 2 times" in poison.error, poison.error
    for record in innocent:
        assert record.ok and record.observation == "slept", record.error
        assert 2 <= record.attempts <= 6 and record.repeated


CRASHING_SERVER = ROOT / "tests" / "servers" / "crashing_server.py"


def crashing(sessions: int = 1) -> McpServerConfig:
    """A stdio entry for ``tests/servers/crashing_server.py``."""
    return McpServerConfig(command=sys.executable, args=[str(CRASHING_SERVER)], sessions=sessions)


def stamped_calls(n: int = CALLS) -> list[list[ToolCall]]:
    """``n`` trajectories of one one-second ``sleep`` of the crashing server each, told apart."""
    return [[ToolCall("sleep", {"seconds": 1.0 + i / 1000})] for i in range(n)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sessions", [1, 4])
def test_calls_in_flight_when_the_server_exits_by_itself_all_come_back_within_3x_a_clean_batch(
    sessions: int,
) -> None:
    """32 one-second calls in flight and a server process exits by itself half-way (``os._exit``, as a
    segfault ends it; no call in flight caused it): every call comes back, re-run together on the restarted
    server, within three times a clean batch (plus, with one process, the time the new one took to start,
    read from when the first re-run began there; it cannot be shorter). Re-run one at a time, as a call
    that may have crashed the server once was, they took 32 s (8 s on one of 4 processes)."""
    provider = McpProvider("crashing", crashing(sessions))
    with ToolExecutor([provider], Limits(call_timeout_s=60, retries=0)) as executor:
        executor.execute([ToolCall("sleep", {"seconds": 0})])
        clean, records = timed_batch(executor, stamped_calls())
        assert all(r.ok for r in records), [r.error for r in records if not r.ok]
        exit_at = float(executor.execute([ToolCall("exit_after", {"seconds": 0.5})])[0].observation)
        crashed, records = timed_batch(executor, stamped_calls())
    failed = [r.error for r in records if not r.ok]
    assert not failed, failed
    rerun = [r for r in records if r.repeated]
    assert len(rerun) == CALLS // sessions and all(r.attempts == 2 for r in rerun), rerun
    restart = min(float(r.observation.split()[0]) for r in rerun) - exit_at if sessions == 1 else 0.0
    assert crashed < 3 * clean + restart, (
        f"recovery took {crashed:.1f} s, a clean batch {clean:.1f} s, the restart {restart:.1f} s"
    )


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of ``spans`` (start, end) that overlap at one moment."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def covered(spans: list[tuple[float, float]]) -> float:
    """Seconds during which at least one of ``spans`` ran."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        total += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return total


@pytest.mark.timeout(180)
def test_a_poison_call_among_31_innocents_is_isolated_while_the_innocents_run_together() -> None:
    """A call that crashes the server each time it runs, among 31 one-second calls: it ends as an error
    naming the crashes; the 31 come back with their results, having run in groups that halve at each death
    (the poison found in five halvings), not one at a time: their runs overlap, 16 at once at first, and
    all of them took a few seconds of server time, where one at a time they took 31."""
    batch = stamped_calls(CALLS - 1)
    batch.insert(13, [ToolCall("crash", {})])
    with ToolExecutor(
        [McpProvider("crashing", crashing())], Limits(call_timeout_s=90, retries=0)
    ) as executor:
        elapsed, records = timed_batch(executor, batch)
        assert executor.execute([ToolCall("sleep", {"seconds": 0})])[0].ok  # the server serves again
    poison, innocent = records[13], records[:13] + records[14:]
    assert not poison.ok and "crashed 2 times while running this call alone" in poison.error, poison.error
    failed = [r.error for r in innocent if not r.ok]
    assert not failed, failed
    spans = [tuple(map(float, r.observation.split())) for r in innocent]
    assert most_at_once(spans) >= 15, sorted(spans)
    assert covered(spans) < 12, f"the innocent calls ran {covered(spans):.1f} s, one at a time 31 s"
    assert all(r.repeated and r.attempts <= 7 for r in innocent), [r.attempts for r in innocent]
