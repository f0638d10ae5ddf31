"""Python tools: schema from signature and docstring, validation, sync and async functions."""

import asyncio
from pathlib import Path

import pytest

from swift_rlfactory.tools import ToolError, tool
from swift_rlfactory.tools.python_tool import load_python_tools


@tool
def convert(value: float, unit: str = "m", precise: bool = False) -> dict:
    """Convert a length.

    A longer explanation.

    Args:
        value: the number to convert
        unit: target unit
        precise: keep all digits
    """
    return {"value": value, "unit": unit, "precise": precise}


@tool(name="fetch", description="Fetch a page.")
async def fetch_page(url: str) -> str:
    await asyncio.sleep(0)
    return f"page {url}"


def test_schema_derived_from_signature_and_docstring():
    schema = convert.spec.openai_schema()
    fn = schema["function"]
    assert fn["name"] == "convert"
    assert fn["description"] == "Convert a length.\n\nA longer explanation."
    params = fn["parameters"]
    assert params["required"] == ["value"]
    assert params["properties"]["value"] == {"type": "number", "description": "the number to convert"}
    assert params["properties"]["unit"]["default"] == "m"
    assert params["properties"]["precise"]["type"] == "boolean"


def test_arguments_are_validated_and_coerced():
    assert asyncio.run(convert.call({"value": "2.5"})) == {"value": 2.5, "unit": "m", "precise": False}
    with pytest.raises(ToolError, match="value: Field required"):
        asyncio.run(convert.call({}))
    with pytest.raises(ToolError, match="bogus"):
        asyncio.run(convert.call({"value": 1, "bogus": 2}))


def test_async_tool_with_custom_name():
    assert fetch_page.spec.name == "fetch" and fetch_page.spec.description == "Fetch a page."
    assert asyncio.run(fetch_page.call({"url": "x"})) == "page x"


def test_exception_inside_tool_becomes_tool_error():
    @tool
    def broken(x: int) -> int:
        """Always fails."""
        raise RuntimeError("boom")

    with pytest.raises(ToolError, match="RuntimeError: boom"):
        asyncio.run(broken.call({"x": 1}))


def test_decorated_function_still_callable():
    assert convert(1.0, "km") == {"value": 1.0, "unit": "km", "precise": False}


def test_load_from_file_relative_to_env_folder():
    [calc] = load_python_tools("tools.py", Path(__file__).parents[1] / "examples" / "calculator")
    assert calc.spec.name == "calculate"
    assert asyncio.run(calc.call({"expression": "(3 + 4) * 12"})) == "84"
    with pytest.raises(ToolError, match="division by zero"):
        asyncio.run(calc.call({"expression": "1/0"}))


def test_load_errors_are_clear(tmp_path):
    with pytest.raises(ImportError, match="file not found"):
        load_python_tools("missing.py", tmp_path)
    (tmp_path / "empty.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="defines no @tool"):
        load_python_tools("empty.py", tmp_path)
    with pytest.raises(ValueError, match="no attribute 'nope'"):
        load_python_tools("empty.py:nope", tmp_path)
    (tmp_path / "script.py").write_text("import sys\nsys.exit(3)\n")  # argparse at top level does this
    with pytest.raises(ImportError, match=r"script\.py called sys\.exit\(3\) while it was imported"):
        load_python_tools("script.py", tmp_path)


def test_a_tool_file_under_home_is_found_through_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "mine.py").write_text(
        Path(__file__).with_name("test_python_tools.py").read_text().split("@tool(name")[0]
    )
    assert "convert" in [t.spec.name for t in load_python_tools("~/mine.py", Path("/nonexistent"))]


@tool
def parse_cli(args: str) -> str:
    """An argparse tool: bad arguments make argparse call sys.exit(2)."""
    import argparse

    parser = argparse.ArgumentParser(prog="parse_cli")
    parser.add_argument("--n", type=int)
    return str(parser.parse_args(args.split()).n)


@tool
async def quit_now(code: int) -> str:
    """An async tool that exits."""
    raise SystemExit(code)


@pytest.mark.timeout(30)
def test_a_tool_that_exits_is_an_error_observation_and_the_executor_lives_on():
    """SystemExit re-raised on the executor's event loop would stop it: every later call would hang."""
    from swift_rlfactory.tools import ToolCall, ToolExecutor
    from swift_rlfactory.tools.toolset import PythonProvider

    with ToolExecutor([PythonProvider([parse_cli, quit_now, convert])]) as executor:
        for _ in range(2):  # twice: the first failure must leave the loop running
            bad, exits, fine = executor.execute(
                [
                    ToolCall("parse_cli", {"args": "--n x"}),
                    ToolCall("quit_now", {"code": 3}),
                    ToolCall("convert", {"value": 2}),
                ]
            )
            assert "SystemExit: 2" in bad.error and "SystemExit: 3" in exits.error
            assert fine.error is None
        assert executor.execute([ToolCall("parse_cli", {"args": "--n 4"})])[0].observation == "4"


@tool
async def await_cancelled_task() -> str:
    """Await a task that was cancelled, which raises CancelledError in the tool."""
    task = asyncio.create_task(asyncio.sleep(10))
    task.cancel()
    await task
    return "unreachable"


def test_a_cancelled_error_from_inside_the_tool_is_a_tool_error():
    with pytest.raises(ToolError, match="CancelledError"):
        asyncio.run(await_cancelled_task.call({}))


async def _looked_up(key: str) -> str:
    await asyncio.sleep(0)
    return f"value of {key}"


@tool
def hands_back_a_coroutine(key: str) -> str:
    """A sync wrapper returning its async helper's coroutine (a forgotten ``async``)."""
    return _looked_up(key)


@pytest.mark.timeout(30)
def test_a_sync_tool_handing_back_a_coroutine_is_awaited():
    """The model used to read ``<coroutine object ...>`` as a successful observation (and a cache would
    keep it); the result was lost without an error."""
    from swift_rlfactory.tools import ToolCall, ToolExecutor
    from swift_rlfactory.tools.toolset import PythonProvider

    with ToolExecutor([PythonProvider([hands_back_a_coroutine])]) as executor:
        [record] = executor.execute([ToolCall("hands_back_a_coroutine", {"key": "k"})])
    assert record.error is None and record.observation == "value of k"
