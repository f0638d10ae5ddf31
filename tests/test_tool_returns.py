"""What a Python tool returns that is not a value: generators are read, forgotten coroutines awaited, and
what reads only as an object's address is an error observation, never a successful ``<generator ...>``."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from swift_rlfactory.tools import Limits, ToolCall, ToolExecutor, tool
from swift_rlfactory.tools.python_tool import MAX_ITEMS
from swift_rlfactory.tools.toolset import PythonProvider

CLOSED: list[str] = []


@tool
def rows(n: int) -> list[int]:
    """Yield ``n`` rows."""
    yield from range(n)


@tool
def endless() -> list[int]:
    """Yield for ever; the executor must stop reading and close the generator."""
    try:
        yield from itertools.count()
    finally:
        CLOSED.append("endless")


@tool
def mapped() -> list[str]:
    """Return a plain iterator (not a generator)."""
    return map(str.upper, ["a", "b"])


@tool
def slow_rows() -> list[int]:
    """A generator whose items take long: read in the tool's thread, under the call's timeout."""
    for i in range(3):
        time.sleep(5)
        yield i


async def _helper() -> str:
    await asyncio.sleep(0)
    return "awaited"


@tool
async def forgets_to_await() -> str:
    """An async tool returning its helper's coroutine un-awaited."""
    return _helper()


class Opaque:
    """No text of its own: ``str`` gives its address."""


@tool
def opaque() -> str:
    """Return an object that reads as ``<...Opaque object at 0x...>``."""
    return Opaque()


@tool
async def async_rows() -> list[int]:
    """Return an async generator, which is not read."""

    async def gen():
        yield 1

    return gen()


@tool(isolation="process")
def isolated_rows(n: int) -> list[int]:
    """A generator returned from a child interpreter."""
    return (i * i for i in range(n))


def run(*calls: ToolCall, timeout: float = 10.0):
    tools = [rows, endless, mapped, slow_rows, forgets_to_await, opaque, async_rows, isolated_rows]
    with ToolExecutor([PythonProvider(tools)], Limits(call_timeout_s=timeout)) as executor:
        return executor.execute(list(calls))


@pytest.mark.timeout(60)
def test_a_returned_generator_or_iterator_is_read():
    three, upper = run(ToolCall("rows", {"n": 3}), ToolCall("mapped", {}))
    assert three.error is None and three.observation == "0\n1\n2"
    assert upper.error is None and upper.observation == "A\nB"


@pytest.mark.timeout(60)
def test_an_endless_generator_is_read_up_to_the_bound_and_closed():
    [record] = run(ToolCall("endless", {}))
    assert record.error is None
    read = [str(i) for i in range(MAX_ITEMS)] + [
        f"... [the tool's iterator was stopped after {MAX_ITEMS} items]"
    ]
    assert record.result_chars == len("\n".join(read))  # the first MAX_ITEMS items and a note, then no more
    assert record.observation.startswith("0\n1\n2\n")
    assert CLOSED == ["endless"]  # its finally ran: the generator was closed, not left suspended


@pytest.mark.timeout(60)
def test_a_slow_generator_is_bounded_by_the_call_timeout():
    t0 = time.monotonic()
    [record] = run(ToolCall("slow_rows", {}), timeout=0.5)
    assert "timed out" in record.error and time.monotonic() - t0 < 5


@pytest.mark.timeout(60)
def test_an_async_tool_returning_an_unawaited_coroutine_is_awaited():
    [record] = run(ToolCall("forgets_to_await", {}))
    assert record.error is None and record.observation == "awaited"


@pytest.mark.timeout(60)
def test_a_value_that_reads_as_an_address_is_an_error_observation():
    opaque_record, agen = run(ToolCall("opaque", {}), ToolCall("async_rows", {}))
    for record, name in ((opaque_record, "opaque"), (agen, "async_rows")):
        assert record.error is not None and name in record.error
        assert " at 0x" not in record.observation
    assert "cannot be shown as text" in opaque_record.error
    assert "async" in agen.error


@pytest.mark.timeout(60)
def test_an_isolated_tool_returning_a_generator_is_read_in_its_child():
    [record] = run(ToolCall("isolated_rows", {"n": 4}))
    assert record.error is None and record.observation == "0\n1\n4\n9"
