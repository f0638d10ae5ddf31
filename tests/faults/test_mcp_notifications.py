"""Notifications a server floods its client with while calls run neither slow the calls nor make them wait:
a changed tool list is fetched again coalesced (one listing in flight, one pending), log messages and
progress no one uses are dropped before the SDK spawns a task for each. Latencies are compared with the
same server's when it is quiet, in the same test."""

from __future__ import annotations

import threading
import time

import pytest

from swift_rlfactory.tools import Limits, ToolCall, ToolExecutor
from swift_rlfactory.tools.mcp import McpProvider, McpServerConfig
from tests.test_mcp import ROOT

FLOOD_SERVER = ROOT / "tests" / "servers" / "flood_server.py"


def one_call_after_another(executor: ToolExecutor, calls: int = 6) -> float:
    """The mean latency of ``calls`` short sleeps, each sent once the last came back."""
    latencies = []
    for _ in range(calls):
        [record] = executor.execute([ToolCall("sleep", {"seconds": 0.2})])
        assert record.ok, record.error
        latencies.append(record.latency_s)
    return sum(latencies) / len(latencies)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["list_changed", "log", "progress"])
def test_a_flood_of_notifications_does_not_slow_the_calls_beside_it(kind: str) -> None:
    config = McpServerConfig(command="python", args=[str(FLOOD_SERVER)])
    with ToolExecutor([McpProvider("flood", config)], Limits(call_timeout_s=60, retries=0)) as executor:
        assert executor.execute([ToolCall("echo", {"text": "up"})])[0].ok
        quiet = one_call_after_another(executor)
        flooded: list = []
        flooding = threading.Thread(
            target=lambda: flooded.extend(executor.execute([ToolCall("flood", {"kind": kind, "seconds": 4})]))
        )
        flooding.start()
        time.sleep(0.3)  # the flood is under way
        loud = one_call_after_another(executor)
        during = flooding.is_alive()
        flooding.join()
        assert executor.execute([ToolCall("echo", {"text": "still here"})])[0].observation == "still here"
    assert loud < 2.5 * quiet, f"calls took {loud:.2f} s during a {kind} flood, {quiet:.2f} s without"
    assert during, "the flood ended before the calls beside it did: nothing was measured"
    assert flooded[0].ok and int(flooded[0].observation) > 100, flooded[0]
