"""Executor semantics with in-process tools: limits, timeouts, retries, truncation, sync and async callers.

MCP-backed behaviour (real servers, restarts, latency targets) is in test_mcp.py.
"""

import asyncio
import contextlib
import threading
import time

import pytest

from swift_rlfactory.tools import (
    ExecutorClosed,
    Limits,
    ToolCache,
    ToolCall,
    ToolExecutor,
    ToolSpec,
    TransportError,
    tool,
)
from swift_rlfactory.tools.toolset import PythonProvider

state = {"flaky": 0, "active": 0, "peak": 0, "runs": 0}


@tool
async def nap(seconds: float) -> str:
    """Sleep, tracking how many naps overlap."""
    state["active"] += 1
    state["peak"] = max(state["peak"], state["active"])
    try:
        await asyncio.sleep(seconds)
    finally:
        state["active"] -= 1
    return "rested"


@tool
async def flaky(fail_times: int) -> str:
    """Raise a transport error the first ``fail_times`` calls."""
    state["flaky"] += 1
    if state["flaky"] <= fail_times:
        raise TransportError("connection reset")
    return f"ok after {state['flaky']}"


@tool
def wordy(n: int) -> str:
    """Return n words."""
    return " ".join(["word"] * n)


@tool
def lookup(key: str) -> str:
    """Count real executions."""
    state["runs"] += 1
    time.sleep(0.05)
    return key.upper()


def make(limits=None, **kwargs):
    state.update(flaky=0, active=0, peak=0, runs=0)
    return ToolExecutor([PythonProvider([nap, flaky, wordy, lookup])], limits or Limits(), **kwargs).start()


def test_batch_runs_concurrently_and_keeps_shape():
    with make() as ex:
        batch = [[ToolCall("nap", {"seconds": 0.3})] * 2, [], [ToolCall("nap", {"seconds": 0.3})]]
        t0 = time.perf_counter()
        out = ex.execute_batch(batch)
        assert time.perf_counter() - t0 < 0.9
        assert [len(r) for r in out] == [2, 0, 1]
        assert all(r.observation == "rested" and r.ok for rs in out for r in rs)
        assert state["peak"] == 3


def test_global_and_per_tool_limits_bound_overlap():
    with make(Limits(max_concurrency=3)) as ex:
        ex.execute([ToolCall("nap", {"seconds": 0.05})] * 12)
        assert state["peak"] == 3
    with make(Limits(per_tool_concurrency={"nap": 2})) as ex:
        ex.execute([ToolCall("nap", {"seconds": 0.05})] * 12)
        assert state["peak"] == 2


def test_timeout_is_an_error_and_others_finish():
    with make(Limits(call_timeout_s=0.3)) as ex:
        hung, quick = ex.execute([ToolCall("nap", {"seconds": 30}), ToolCall("nap", {"seconds": 0.01})])
        assert hung.error and "timed out after 0.3 s" in hung.error and hung.observation.startswith("Error:")
        assert quick.ok


def test_transport_errors_are_retried_tool_errors_are_not():
    with make(Limits(retries=2, retry_backoff_s=0.01)) as ex:
        [ok] = ex.execute([ToolCall("flaky", {"fail_times": 2})])
        assert ok.ok and ok.observation == "ok after 3" and ok.attempts == 3
        assert ok.repeated  # a tool that raised TransportError itself ran: its retries repeat it
    with make(Limits(retries=1, retry_backoff_s=0.01)) as ex:
        [bad] = ex.execute([ToolCall("flaky", {"fail_times": 5})])
        assert bad.attempts == 2 and "unreachable after 2 attempts" in bad.error
        [invalid] = ex.execute([ToolCall("flaky", {"fail_times": "many"})])
        assert invalid.attempts == 1 and "invalid arguments" in invalid.error


def test_output_is_truncated():
    with make(Limits(max_output_tokens=10)) as ex:
        [r] = ex.execute([ToolCall("wordy", {"n": 100})])
        assert r.observation.startswith("word word") and "[truncated" in r.observation
        assert len(r.observation) <= 40  # four characters a token, the marker included
    with make(Limits(max_output_tokens=10), count_tokens=lambda s: len(s.split())) as ex:
        [r] = ex.execute([ToolCall("wordy", {"n": 100})])
        # the marker "... [truncated N characters]" is 4 of the 10 "tokens"
        assert r.observation.split("\n")[0].split() == ["word"] * 6 and len(r.observation.split()) == 10


def test_unknown_and_unparsed_calls_are_error_records():
    with make() as ex:
        unknown, unparsed = ex.execute([ToolCall("nope"), ToolCall("", error="empty <tool_call> block")])
        assert "unknown tool 'nope'" in unknown.error and "nap" in unknown.observation
        assert "could not parse tool call" in unparsed.observation and unparsed.attempts == 0


def test_cache_coalesces_and_counts_hits():
    with make(cache=ToolCache(), cached_tools={"lookup"}) as ex:
        out = ex.execute([ToolCall("lookup", {"key": "a"})] * 8 + [ToolCall("lookup", {"key": "b"})])
        assert state["runs"] == 2
        assert sum(r.cache_hit for r in out) == 7
        [again] = ex.execute([ToolCall("lookup", {"key": "a"})])
        assert again.cache_hit and state["runs"] == 2
        ex.execute([ToolCall("nap", {"seconds": 0.01})] * 2)
        assert ex.cache.hits == 8  # nap is not in cached_tools


def test_async_callers_are_not_blocked():
    """Tools awaited from a running loop leave that loop free: a ticker keeps ticking meanwhile."""
    with make() as ex:

        async def main():
            ticks = 0

            async def ticker():
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            task = asyncio.create_task(ticker())
            results = await asyncio.gather(
                *(ex.aexecute([ToolCall("nap", {"seconds": 0.3})]) for _ in range(8))
            )
            task.cancel()
            return ticks, results

        t0 = time.perf_counter()
        ticks, results = asyncio.run(main())
        assert time.perf_counter() - t0 < 0.9
        assert ticks >= 10
        assert all(r[0].ok for r in results)


def test_sync_callers_from_many_threads():
    with make() as ex:
        out = []

        def worker():
            out.append(ex.execute([ToolCall("nap", {"seconds": 0.2})])[0].ok)

        threads = [threading.Thread(target=worker) for _ in range(6)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert out == [True] * 6 and time.perf_counter() - t0 < 0.8


def test_provider_failure_at_start_is_raised():
    class Broken:
        name = "broken"

        async def start(self):
            raise RuntimeError("MCP server 'broken' failed to start: exit 1")

        async def close(self):
            pass

    ex = ToolExecutor([Broken()])
    with pytest.raises(RuntimeError, match="'broken' failed to start"):
        ex.start()
    ex.close()


def test_clashing_names_get_free_public_names_and_each_call_reaches_its_own_tool():
    """The ``web`` provider offers ``web_echo`` (its own name) and ``echo`` (taken by the first provider):
    the renamed ``echo`` must not take ``web_echo``, nor fail the start-up."""

    def echo_as(name: str, reply: str):
        return tool(lambda text: f"{reply}: {text}", name=name, description="Say who answered.")

    local = PythonProvider([echo_as("echo", "local")], name="local")
    web = PythonProvider(
        [echo_as("echo", "web"), echo_as("web_echo", "web's own"), echo_as("echo", "web again")], name="web"
    )
    with ToolExecutor([local, web]) as executor:
        assert sorted(executor.tools) == ["echo", "web_echo", "web_echo_2", "web_echo_3"]
        replies = executor.execute(
            [ToolCall(n, {"text": "hi"}) for n in ("echo", "web_echo", "web_echo_2", "web_echo_3")]
        )
        assert [r.observation for r in replies] == ["local: hi", "web's own: hi", "web: hi", "web again: hi"]


def test_a_failure_while_merging_the_tools_closes_every_provider():
    closed = []

    class Provider:
        def __init__(self, name, tools):
            self.name, self._tools = name, tools

        async def start(self):
            return self._tools

        async def close(self):
            closed.append(self.name)

    ex = ToolExecutor([Provider("good", [nap]), Provider("buggy", [object()])])  # not a tool: no spec
    with pytest.raises(AttributeError):
        ex.start()
    assert sorted(closed) == ["buggy", "good"]
    ex.close()


@tool
async def race_mirrors(url: str) -> str:
    """Cancel the losing task and await it anyway, a common asyncio slip: CancelledError inside the tool."""
    loser = asyncio.create_task(asyncio.sleep(10))
    loser.cancel()
    await loser
    return "unreachable"


class RawRacer:
    """A tool that is no PythonTool (as an MCP backend is not), with the same slip in its ``call``."""

    spec = ToolSpec(name="raw_racer", description="Race two mirrors.")

    async def call(self, arguments: dict) -> str:
        return await race_mirrors.fn("x")


def test_a_cancelled_error_raised_inside_a_tool_is_its_error_record():
    """CancelledError is no Exception, so it slipped past every error boundary and took the whole batch
    down; the executor was not being cancelled, so it is the tool's failure, like any other."""
    with ToolExecutor([PythonProvider([race_mirrors, RawRacer(), wordy])], Limits()) as ex:
        poison = [[ToolCall("race_mirrors", {"url": "x"})], [ToolCall("raw_racer", {})]]
        out = ex.execute_batch([[ToolCall("wordy", {"n": 1})]] * 9 + poison)
        assert all(rs[0].ok for rs in out[:9])
        assert "CancelledError" in out[9][0].error and "CancelledError" in out[10][0].error
        # one rule, one wording: a Python tool says it as any other backend does
        assert out[9][0].error.replace("race_mirrors", "T") == out[10][0].error.replace("raw_racer", "T")

        async def from_another_loop():
            return await ex.aexecute([ToolCall("race_mirrors", {"url": "x"})])

        (record,) = asyncio.run(from_another_loop())
        assert not record.ok and "CancelledError" in record.error


def test_cancelling_the_caller_still_cancels_the_call():
    """The other direction: a caller that gives up (a watchdog's wait_for) gets its cancellation through."""
    with make() as ex:

        async def impatient():
            await asyncio.wait_for(ex.aexecute([ToolCall("nap", {"seconds": 30})]), 0.2)

        with pytest.raises(TimeoutError):
            asyncio.run(impatient())


@tool
async def stubborn(seconds: float) -> str:
    """Swallow every cancellation until ``seconds`` have passed (a retry loop around a bare ``except``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(deadline - time.monotonic())
    return "late"


def test_a_tool_that_swallows_cancellation_still_times_out_and_frees_its_slots():
    """The timeout cancels the call; a tool that ignores that is abandoned after a short grace, so the call
    is a timeout at about ``call_timeout_s`` and the only global slot serves the next call at once."""
    limits = Limits(call_timeout_s=0.3, max_concurrency=1, retries=0)
    with ToolExecutor([PythonProvider([stubborn, wordy])], limits) as ex:
        t0 = time.perf_counter()
        (record,) = ex.execute([ToolCall("stubborn", {"seconds": 20})])
        assert "timed out after 0.3 s" in record.error
        assert time.perf_counter() - t0 < 3

        async def watchdog_gives_up_then_another_call():
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(ex.aexecute([ToolCall("stubborn", {"seconds": 20})]), 0.1)
            return await asyncio.wait_for(ex.aexecute([ToolCall("wordy", {"n": 2})]), 3)

        (after,) = asyncio.run(watchdog_gives_up_then_another_call())
        assert after.observation == "word word"


@tool
def blocking_lookup(key: str) -> str:
    """A blocking client call (a sync database or HTTP driver) taking 1.5 s."""
    time.sleep(1.5)
    return key


def test_sync_tools_run_as_wide_as_max_concurrency_and_never_time_out_in_a_queue():
    """The sync pool had a hidden cap of 32 threads, and the timeout counted the time a call waited for one:
    of 48 such calls with a timeout under two of them, 16 timed out without ever running. The executor
    reserves ``max_concurrency`` threads, so every call that holds a slot has a thread. (1.5 s calls, 2.5 s
    timeout: a call that queued behind another needs 3 s; one that did not has a second to spare on a busy
    machine, where 0.5 s calls with 0.9 s once all timed out.)"""
    limits = Limits(call_timeout_s=2.5, max_concurrency=256, retries=0)
    with ToolExecutor([PythonProvider([blocking_lookup])], limits) as ex:
        records = ex.execute([ToolCall("blocking_lookup", {"key": str(i)}) for i in range(48)])
    assert [r.error for r in records if not r.ok] == []
    assert [r.observation for r in records] == [str(i) for i in range(48)]


class SlowStartProvider:
    """A provider that takes a while to start (an MCP server spawning) and counts its starts."""

    name = "slow_start"

    def __init__(self):
        self.starts = 0

    async def start(self) -> list:
        self.starts += 1
        await asyncio.sleep(0.2)
        return [wordy]

    async def close(self) -> None:
        """Nothing to release."""


def test_concurrent_first_calls_start_the_providers_once():
    """Every first ``aexecute`` saw the executor unstarted and started the providers again, leaking a
    server process per extra start."""
    provider = SlowStartProvider()
    ex = ToolExecutor([provider], Limits())

    async def three_first_calls():
        return await asyncio.gather(*(ex.aexecute([ToolCall("wordy", {"n": 1})]) for _ in range(3)))

    try:
        assert [rs[0].observation for rs in asyncio.run(three_first_calls())] == ["word"] * 3
        ex.start()
        assert provider.starts == 1
    finally:
        ex.close()


def test_closing_with_calls_in_flight_ends_them_and_leaves_no_pending_task(caplog: pytest.LogCaptureFixture):
    """``close()`` stopped the loop under running calls: their caller waited forever, and the calls' tasks
    (an abandoned one too) were destroyed pending, which asyncio logs as "Task was destroyed but it is
    pending!". Now close cancels them and waits; a caller learns the executor closed under it."""
    import gc

    ex = ToolExecutor([PythonProvider([nap, stubborn])], Limits(call_timeout_s=0.3, retries=0)).start()
    assert "timed out" in ex.execute([ToolCall("stubborn", {"seconds": 20})])[0].error  # abandoned, running
    ex.limits.call_timeout_s = 30  # the next call is still running when close() comes
    outcome: list[BaseException] = []

    def caller() -> None:
        try:
            ex.execute([ToolCall("nap", {"seconds": 30})])
        except BaseException as exc:  # noqa: BLE001  (what the caller gets is the point)
            outcome.append(exc)

    thread = threading.Thread(target=caller, daemon=True)
    thread.start()
    time.sleep(0.3)
    t0 = time.perf_counter()
    ex.close()
    thread.join(5)
    assert not thread.is_alive() and time.perf_counter() - t0 < 5
    assert isinstance(outcome[0], ExecutorClosed) and "closed while these calls ran" in str(outcome[0])
    ex = None
    gc.collect()
    assert "destroyed but it is pending" not in caplog.text
    assert "still running when the executor closed" in caplog.text  # the stubborn tool, named
