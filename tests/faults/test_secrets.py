"""Secrets named as ``${VAR}`` in MCP configs never reach an error, an observation or a log record, and a
stdio server sees only the environment it is given.

Every test captures all log records of every logger at DEBUG and every message we produce, and searches
them for the secret's value.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from swift_rlfactory.env.config import load_env_config
from swift_rlfactory.rollout.log import TrajectoryLog, read_trajectories
from swift_rlfactory.secrets import expand, redact
from swift_rlfactory.tools import Limits, ToolCall, ToolExecutor, tool
from swift_rlfactory.tools.mcp import mcp_providers
from swift_rlfactory.tools.toolset import PythonProvider
from swift_rlfactory.trajectory import Trajectory
from tests.test_mcp import SLOW_SERVER, free_port, serve

SECRET = "sk-test-4f9a1c0ffee-5ecret"
UNRELATED = "parent-only-secret-7731"


@pytest.fixture(autouse=True)
def secret_env(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("RLF_SECRET", SECRET)
    monkeypatch.setenv("RLF_UNRELATED_SECRET", UNRELATED)
    caplog.set_level(logging.DEBUG)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    yield from serve("streamable-http", "/mcp")


def providers(tmp_path: Path, servers: str):
    """Providers for an environment whose ``mcpServers`` block is ``servers`` (YAML flow mappings)."""
    env = tmp_path / "env.yaml"
    env.write_text(f"tools:\n  mcp:\n    mcpServers:\n{servers}")
    return mcp_providers(load_env_config(env).mcp_servers())


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every captured record as a handler would print it, tracebacks included."""
    formatter = logging.Formatter("%(name)s %(message)s")
    return "\n".join(formatter.format(record) for record in caplog.records)


@pytest.mark.timeout(60)
def test_secret_in_stdio_args_stays_out_of_start_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    servers = (
        "      bad: {command: python, args: ['-c', 'raise SystemExit(3)', '--token', '${RLF_SECRET}']}\n"
    )
    executor = ToolExecutor(providers(tmp_path, servers))
    with pytest.raises(RuntimeError) as failure:
        executor.start()
    executor.close()
    assert "--token '${RLF_SECRET}'" in str(failure.value) or "--token ${RLF_SECRET}" in str(failure.value)
    assert SECRET not in str(failure.value) and SECRET not in logged(caplog)


@pytest.mark.timeout(60)
def test_secret_in_url_and_headers_stays_out_of_errors_and_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, http_url: str
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/mcp?key=${{RLF_SECRET}}&user=bob"
    executor = ToolExecutor(providers(tmp_path, f"      gone: {{url: '{dead}', startup_timeout_s: 10}}\n"))
    with pytest.raises(RuntimeError) as failure:
        executor.start()
    executor.close()
    message = str(failure.value)
    assert "MCP server 'gone'" in message and SECRET not in message and "user=***" in message

    # A live server, with the HTTP client's own loggers opted in to DEBUG: URLs are logged, values are not.
    caplog.set_level(logging.DEBUG, logger="httpx2")
    caplog.set_level(logging.DEBUG, logger="httpx")
    live = (
        f"      live: {{url: '{http_url}?token=${{RLF_SECRET}}',"
        " headers: {Authorization: 'Bearer ${RLF_SECRET}', X-Api-Key: '${RLF_SECRET}'}}\n"
    )
    with ToolExecutor(providers(tmp_path, live), Limits(call_timeout_s=20)) as executor:
        echo, failed = executor.execute(
            [ToolCall("echo", {"text": "hi"}), ToolCall("fail", {"message": SECRET})]
        )
    assert echo.observation == "hi"
    assert not failed.ok and "${RLF_SECRET}" in failed.observation
    assert SECRET not in failed.observation and SECRET not in (failed.error or "")
    text = logged(caplog)
    assert "HTTP Request" in text  # the client did log its requests ...
    assert SECRET not in text  # ... without the token


def test_redact_shows_the_variable_and_blanks_query_values() -> None:
    from swift_rlfactory.secrets import expand

    assert expand("Bearer ${RLF_SECRET}") == f"Bearer {SECRET}"
    assert redact(f"failed: Bearer {SECRET}") == "failed: Bearer ${RLF_SECRET}"
    assert redact("GET http://h/mcp?a=1&b=two#x") == "GET http://h/mcp?a=***&b=***#x"


@pytest.mark.timeout(60)
def test_stdio_server_sees_only_the_environment_it_is_given(tmp_path: Path) -> None:
    servers = (
        f"      safe: {{command: python, args: ['{SLOW_SERVER}'], env: {{GIVEN: '${{RLF_SECRET}}'}}}}\n"
        f"      open: {{command: python, args: ['{SLOW_SERVER}'], inherit_env: true}}\n"
    )
    with ToolExecutor(providers(tmp_path, servers), Limits(call_timeout_s=20)) as executor:
        unrelated, given, path, inherited = executor.execute(
            [
                ToolCall("getenv", {"name": "RLF_UNRELATED_SECRET"}),
                ToolCall("getenv", {"name": "GIVEN"}),
                ToolCall("getenv", {"name": "PATH"}),
                ToolCall("open_getenv", {"name": "RLF_UNRELATED_SECRET"}),
            ]
        )
    assert unrelated.observation == "<unset>"
    assert given.observation == SECRET  # what env: names, the server gets
    assert path.observation not in ("", "<unset>")  # the SDK's safe variables
    assert inherited.observation == UNRELATED


@tool
def leaky_search(q: str) -> str:
    """Fail the way an HTTP client does, echoing the credential it sent."""
    raise RuntimeError(
        f"401 from https://api.example/search?q={q}&lang=en for key {os.environ['RLF_SECRET']}"
    )


def test_a_secret_in_a_tool_error_reaches_neither_the_model_nor_the_trajectory_log(tmp_path: Path) -> None:
    expand("Bearer ${RLF_SECRET}")  # what loading `headers: {Authorization: "Bearer ${RLF_SECRET}"}` does
    with ToolExecutor([PythonProvider([leaky_search])], Limits()) as ex:
        (record,) = ex.execute([ToolCall("leaky_search", {"q": "x"})])
    assert SECRET not in record.observation and SECRET not in record.error
    assert "${RLF_SECRET}" in record.observation
    assert "search?q=x&lang=en" in record.observation  # what the model asked for, not a secret: kept

    # the log redacts the secrets a trajectory carries, and each line stays JSON a reader can parse; a
    # URL's other query values are what the model read, kept for rescoring
    page = f'<a href="https://h/?key={SECRET}&q=hamlet">next</a> said {SECRET}'
    trajectory = Trajectory(
        messages=[{"role": "tool", "content": page}], tool_calls=[{"arguments": {"token": SECRET}}]
    )
    log = TrajectoryLog(tmp_path / "trajectories.jsonl")
    log.write([trajectory])
    assert SECRET not in log.path.read_text()
    (line,) = read_trajectories(log.path)
    assert line["messages"][0]["content"] == (
        '<a href="https://h/?key=${RLF_SECRET}&q=hamlet">next</a> said ${RLF_SECRET}'
    )
    assert line["tool_calls"] == [{"arguments": {"token": "${RLF_SECRET}"}}]
