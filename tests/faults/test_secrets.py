"""Secrets named as ``${VAR}`` in MCP configs never reach an error, an observation or a log record, and a
stdio server sees only the environment it is given.

Every test captures all log records of every logger at DEBUG and every message we produce, and searches
them for the secret's value.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

import anyio
import pytest

from swift_rlfactory.env.config import EnvConfigError, load_env_config
from swift_rlfactory.redaction import expand, redact, remember_url
from swift_rlfactory.runs.log import TrajectoryLog, read_trajectories
from swift_rlfactory.tools import Limits, ToolCall, ToolExecutor, tool
from swift_rlfactory.tools.mcp import mcp_providers
from swift_rlfactory.tools.mcp.config import McpConfig
from swift_rlfactory.tools.toolset import PythonProvider
from swift_rlfactory.trajectory import Trajectory
from tests.conftest import wait_for_port
from tests.test_mcp import SLOW_SERVER, free_port, serve

SECRET = "sk-test-4f9a1c0ffee-5ecret"
UNRELATED = "parent-only-secret-7731"
FILE_KEY = "sk-file-kept-key-81f3e07"  # a secret of its own: the first name it is recorded under wins


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
    from swift_rlfactory.redaction import expand

    assert expand("Bearer ${RLF_SECRET}") == f"Bearer {SECRET}"
    assert redact(f"failed: Bearer {SECRET}") == "failed: Bearer ${RLF_SECRET}"
    assert redact("GET http://h/mcp?a=1&b=two#x") == "GET http://h/mcp?a=***&b=***#x"


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("(auto http://127.0.0.1:9/mcp?key=s3cr3t) failed to start", "(auto http://127.0.0.1:9/mcp?key=***) failed to start"),
        ("see [http://h/?t=s3cr3t].", "see [http://h/?t=***]."),
        ("'http://h/?a=1&b=s3cr3t', <http://h/?k=s3cr3t>;", "'http://h/?a=***&b=***', <http://h/?k=***>;"),
        ("http://h/?k=s3(cr)3t, then", "http://h/?k=***, then"),  # brackets inside a value: hidden with it
        # a value already shown as its variable stays so, whole (it was blanked to "***}")
        ("http://h/mcp?api_key=${TOKEN} failed", "http://h/mcp?api_key=${TOKEN} failed"),
        ("(http://h/?a=${A}&b=s3cr3t)", "(http://h/?a=${A}&b=***)"),
        ("http://h/?a=${A}x", "http://h/?a=***"),  # a variable inside a longer value: blanked
    ],
)  # fmt: skip
def test_a_query_value_ends_where_the_url_does(text: str, redacted: str) -> None:
    """The blanking stops at the URL's end: it used to swallow the ``)`` of ``(... ?key=...)`` (and any
    punctuation after the URL), so an error's text lost its bracket."""
    assert redact(text) == redacted


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
                ToolCall("getenv", {"name": "GIVEN", "digest": True}),
                ToolCall("getenv", {"name": "PATH"}),
                ToolCall("open_getenv", {"name": "RLF_UNRELATED_SECRET"}),
            ]
        )
    assert unrelated.observation == "<unset>"
    assert given.observation == sha256(SECRET)  # what env: names, the server gets
    assert path.observation not in ("", "<unset>")  # the SDK's safe variables
    assert inherited.observation == UNRELATED


PROXY = "http://rlf:pr0xy%40pass-77@proxy.invalid:3128"
PASSED = {
    "CUDA_VISIBLE_DEVICES": "3",
    "NO_PROXY": "localhost,127.0.0.1",
    "no_proxy": "localhost,127.0.0.1",
    "SSL_CERT_FILE": "/etc/ssl/certs/corp.pem",
    "SSL_CERT_DIR": "/etc/ssl/certs",
    "REQUESTS_CA_BUNDLE": "/etc/ssl/certs/corp.pem",
    "NODE_EXTRA_CA_CERTS": "/etc/ssl/certs/corp.pem",
}


@pytest.mark.timeout(60)
def test_a_stdio_server_gets_the_gpus_proxy_and_certificates_without_the_proxy_password_in_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``CUDA_VISIBLE_DEVICES`` and the proxy and certificate variables reach a stdio server without
    ``inherit_env``: a server on a GPU machine behind a corporate proxy works as it does in a shell. The
    password of a proxy URL is a secret: the model and the logs read ``rlf:***@``."""
    for name, value in {**PASSED, "HTTPS_PROXY": PROXY, "http_proxy": PROXY}.items():
        monkeypatch.setenv(name, value)
    servers = f"      plain: {{command: python, args: ['{SLOW_SERVER}']}}\n"
    names = [*PASSED, "HTTPS_PROXY", "http_proxy"]
    with ToolExecutor(providers(tmp_path, servers), Limits(call_timeout_s=20)) as executor:
        records = executor.execute([ToolCall("getenv", {"name": name}) for name in names])
        digest = executor.execute([ToolCall("getenv", {"name": "HTTPS_PROXY", "digest": True})])[0]
    seen = {name: record.observation for name, record in zip(names, records, strict=True)}
    shown = "http://rlf:***@proxy.invalid:3128"
    assert seen == {**PASSED, "HTTPS_PROXY": shown, "http_proxy": shown}
    assert digest.observation == sha256(PROXY)  # the server got the URL whole
    logging.getLogger("tests.proxy").warning("using proxy %s", PROXY)
    assert shown in logged(caplog) and "pr0xy" not in logged(caplog)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.timeout(60)
def test_a_secret_a_server_echoes_reaches_neither_the_model_nor_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that shows its environment (server-everything's ``get-env``) echoes the key its ``env:``
    names as ``${VAR}``: the model reads ``${RLF_SECRET}`` in a successful observation, as it would in an
    error, and the trajectory log holds the very text the model read."""
    servers = f"      ev: {{command: python, args: ['{SLOW_SERVER}'], env: {{TOKEN: '${{RLF_SECRET}}'}}}}\n"
    with ToolExecutor(providers(tmp_path, servers), Limits(call_timeout_s=20)) as executor:
        echoed, digest, shape = executor.execute(
            [
                ToolCall("getenv", {"name": "TOKEN"}),
                ToolCall("getenv", {"name": "TOKEN", "digest": True}),
                ToolCall("shape", {}),
            ]
        )
    assert echoed.ok and echoed.observation == "${RLF_SECRET}"
    assert digest.observation == sha256(SECRET)  # the server did get the key
    assert '"sides": 6' in shape.observation  # other results as they were
    log = TrajectoryLog(tmp_path / "trajectories.jsonl")
    log.write([Trajectory(messages=[{"role": "tool", "content": echoed.observation}])])
    (logged_trajectory,) = read_trajectories(log.path)
    assert logged_trajectory["messages"][0]["content"] == echoed.observation
    assert SECRET not in log.path.read_text() + logged(caplog)


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


AUTH_SERVER = SLOW_SERVER.parent / "auth_server.py"
TOKEN = "tok-9d2e41-right-one"


@pytest.fixture(scope="module")
def auth_url() -> Iterator[str]:
    """The slow server over streamable HTTP, answering 401 to any request without ``Bearer TOKEN``."""
    yield from serve_auth()


@pytest.fixture
def revocable_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """An auth server of its own for one test (over the transport the test names), which its ``revoke``
    tool turns into refusing everything."""
    yield from serve_auth(request.param)


def serve_auth(transport: str = "streamable-http", token: str = TOKEN) -> Iterator[str]:
    """Run the auth server in a subprocess, wanting ``token``; yield its URL once it accepts connections."""
    port = free_port()
    args = ["--port", str(port), "--token", token, "--transport", transport]
    proc = subprocess.Popen([sys.executable, str(AUTH_SERVER), *args])
    try:
        wait_for_port(port, proc, timeout_s=30)
        yield f"http://127.0.0.1:{port}/{'sse' if transport == 'sse' else 'mcp'}"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_claude_code_defaults_and_every_variable_form_expand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``${VAR:-default}`` (Claude Code), ``${env:VAR}`` (VS Code), ``{env:VAR}`` (opencode) and ``$VAR``,
    in every field that is expanded; a used default is recorded as the secret it stands in for. The defaults
    here are words no other test writes: a recorded secret stays recorded for the whole test process, and a
    default of ``python`` made later errors read ``${RLF_UNSET}`` for every "python" in them."""
    monkeypatch.setenv("RLF_EMPTY", "")
    monkeypatch.delenv("RLF_UNSET", raising=False)
    (tmp_path / "server.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "local": {
                        "command": "${RLF_UNSET:-./dflt-cmd-5150}",
                        "args": ["${RLF_SECRET:-x}", "${RLF_UNSET:-dflt-arg-31337}", "${userHome}${/}a", "$RLF_UNSET"],
                        "env": {"A": "${env:RLF_SECRET}", "B": "{env:RLF_SECRET}", "C": "${RLF_EMPTY:-dflt-fallback-6161}"},
                        "cwd": "${workspaceFolder}/srv",
                    },
                    "remote": {
                        "url": "http://127.0.0.1:1/${RLF_UNSET:-mcp}?k=${RLF_SECRET}",
                        "headers": {"Authorization": "Bearer ${RLF_UNSET:-dflt-token-77aa}"},
                    },
                }
            }
        )
    )  # fmt: skip
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "dflt-cmd-5150").write_text("#!/bin/sh\n")
    (tmp_path / "srv" / "dflt-cmd-5150").chmod(0o755)  # a command names a program, or fails at load
    env = tmp_path / "env.yaml"
    env.write_text("tools:\n  mcp_config: server.json\n")
    servers = load_env_config(env).mcp_servers().mcpServers
    local, remote = servers["local"], servers["remote"]
    assert local.command == "./dflt-cmd-5150" and local.cwd == str(tmp_path / "srv")
    assert local.args == [SECRET, "dflt-arg-31337", f"{Path.home()}{os.sep}a", "$RLF_UNSET"]
    assert local.env == {"A": SECRET, "B": SECRET, "C": "dflt-fallback-6161"}
    assert remote.url == f"http://127.0.0.1:1/mcp?k={SECRET}"
    assert remote.headers == {"Authorization": "Bearer dflt-token-77aa"}
    assert redact("sent Bearer dflt-token-77aa") == "sent Bearer ${RLF_UNSET}"  # a default is a secret too


@pytest.mark.parametrize(
    ("entry", "field", "named"),
    [
        ({"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${RLF_UNSET}"}},
         "headers.Authorization", "RLF_UNSET"),
        ({"command": "python", "env": {"TOKEN": "${env:RLF_UNSET}"}}, "env.TOKEN", "RLF_UNSET"),
        ({"command": "python", "args": ["--key", "{env:RLF_UNSET}"]}, r"args\[1\]", "RLF_UNSET"),
        ({"url": "http://127.0.0.1:1/mcp?key=${RLF_UNSET}"}, "url", "RLF_UNSET"),
        ({"type": "stdio", "command": "python", "env": {"TOK": "${input:tok}"}}, "env.TOK", r"\$\{input:tok\}"),
        ({"url": "http://127.0.0.1:1/mcp", "headers": {"X": "${command:pick}"}}, "headers.X", "command:pick"),
    ],
)  # fmt: skip
def test_an_unset_variable_or_an_editor_prompt_fails_at_load_naming_it_and_the_field(
    entry: dict, field: str, named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code fails to parse such a config too; sending ``${TOKEN}`` would only 401 later."""
    monkeypatch.delenv("RLF_UNSET", raising=False)
    (tmp_path / "mcp.json").write_text(json.dumps({"servers": {"s1": entry}}))
    env = tmp_path / "env.yaml"
    env.write_text("tools:\n  mcp_config: mcp.json\n")
    with pytest.raises(EnvConfigError, match=rf"MCP server 's1': {field}: .*{named}") as failure:
        load_env_config(env)
    assert SECRET not in str(failure.value)
    inline = tmp_path / "inline.yaml"  # inline servers alike
    inline.write_text(f"tools:\n  mcp: {json.dumps({'mcpServers': {'s1': entry}})}\n")
    with pytest.raises(EnvConfigError, match=rf"MCP server 's1': {field}: .*{named}"):
        load_env_config(inline)
    entry_off = {**entry, "disabled": True}  # a server that is not started needs no variables
    (tmp_path / "mcp.json").write_text(
        json.dumps({"servers": {"s1": entry_off}, "mcpServers": {"ok": {"command": "python"}}})
    )
    assert list(load_env_config(env).mcp_servers().mcpServers) == ["ok"]


@pytest.mark.timeout(90)
def test_a_default_token_reaches_the_server_and_a_wrong_one_fails_at_start_with_the_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, auth_url: str
) -> None:
    monkeypatch.delenv("RLF_AUTH_TOKEN", raising=False)
    good = f"      api: {{type: http, url: '{auth_url}', headers: {{Authorization: 'Bearer ${{RLF_AUTH_TOKEN:-{TOKEN}}}'}}}}\n"
    with ToolExecutor(providers(tmp_path, good), Limits(call_timeout_s=20)) as executor:
        (echo,) = executor.execute([ToolCall("echo", {"text": "authorized"})])
    assert echo.observation == "authorized"

    monkeypatch.setenv("RLF_AUTH_TOKEN", "tok-wrong-5550123")  # set: wins over the default
    executor = ToolExecutor(providers(tmp_path, good))
    with pytest.raises(RuntimeError) as failure:
        executor.start()
    executor.close()
    message = str(failure.value)
    assert "MCP server 'api'" in message and "HTTP 401 Unauthorized" in message
    for value in ("tok-wrong-5550123", TOKEN):
        assert value not in message and value not in logged(caplog)


@pytest.mark.timeout(90)
def test_codex_tokens_named_by_variable_stay_out_of_errors_and_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, auth_url: str
) -> None:
    """Codex's ``bearer_token_env_var`` and ``env_http_headers`` name variables, not values: what they hold
    is as secret as a ``${VAR}`` in a header, in a refused start (401), a dead server's error and the HTTP
    client's own debug logs."""
    caplog.set_level(logging.DEBUG, logger="httpx2")
    caplog.set_level(logging.DEBUG, logger="httpx")
    monkeypatch.setenv("RLF_CODEX_HEADER", "hdr-codex-9f31c2d4e5")
    dead = f"http://127.0.0.1:{free_port()}/mcp"
    (tmp_path / "config.toml").write_text(
        f'model = "o3"\n[mcp_servers.api]\nurl = "{auth_url}"\nbearer_token_env_var = "RLF_SECRET"\n'
        'env_http_headers = { "X-Api-Key" = "RLF_CODEX_HEADER" }\n'
        f'[mcp_servers.gone]\nurl = "{dead}"\nbearer_token_env_var = "RLF_SECRET"\nstartup_timeout_sec = 10\n'
    )
    env = tmp_path / "env.yaml"
    env.write_text("tools:\n  mcp_config: config.toml\n")
    servers = load_env_config(env).mcp_servers().mcpServers
    assert servers["api"].headers["Authorization"] == f"Bearer {SECRET}"
    for name, why in (("api", "HTTP 401 Unauthorized"), ("gone", "")):  # the auth server wants TOKEN
        executor = ToolExecutor(mcp_providers(McpConfig(mcpServers={name: servers[name]})))
        with pytest.raises(RuntimeError) as failure:
            executor.start()
        executor.close()
        message = str(failure.value)
        assert f"MCP server '{name}'" in message and why in message, message
        for value in (SECRET, "hdr-codex-9f31c2d4e5"):
            assert value not in message and value not in logged(caplog)


@pytest.mark.timeout(60)
def test_a_token_read_with_its_newline_authenticates_and_a_line_break_inside_fails_at_load_naming_the_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, auth_url: str
) -> None:
    """A token kept with its trailing newline (a Kubernetes secret or a ``.env`` file written by ``echo``)
    is the token: HTTP takes no whitespace around a header value (RFC 9110, 5.5), so it is stripped, and the
    stripped token is as secret as the one read. A line break inside a value cannot be sent: it fails at
    load naming the header, not at start as httpx's "Illegal header value b'Bearer <the token>'"."""
    monkeypatch.setenv("RLF_AUTH_TOKEN", TOKEN + "\n")
    entry = f"      api: {{type: http, url: '{auth_url}', headers: {{Authorization: 'Bearer ${{RLF_AUTH_TOKEN}}'}}}}\n"
    with ToolExecutor(providers(tmp_path, entry), Limits(call_timeout_s=20)) as executor:
        (echo,) = executor.execute([ToolCall("echo", {"text": f"said {TOKEN}"})])
    assert echo.observation == "said ${RLF_AUTH_TOKEN}"

    monkeypatch.setenv("RLF_AUTH_TOKEN", "tok-inner-5550123\r\nX-Injected: 1")
    with pytest.raises(EnvConfigError) as failure:
        providers(tmp_path, entry)
    message = str(failure.value)
    assert "MCP server 'api'" in message and "headers.Authorization" in message and "line break" in message
    assert "tok-inner-5550123" not in message + logged(caplog)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("revocable_url", "status", "reason"),
    [
        ("streamable-http", 401, "Unauthorized"),
        ("streamable-http", 403, "Forbidden"),
        ("streamable-http", 500, "Internal Server Error"),
        ("sse", 401, "Unauthorized"),
    ],
    indirect=["revocable_url"],
)
def test_a_server_that_refuses_a_call_later_names_the_http_status_in_the_observation(
    status: int, reason: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, revocable_url: str
) -> None:
    """A server that started fine and later answers a call with 401/403/500 (a token revoked or expired
    mid-run): the SDK's own error says only "Server returned an error response" (the SSE transport's, the
    code without its reason); the model and the logs must see the status, and still never the token."""
    kind = "sse" if revocable_url.endswith("/sse") else "http"
    entry = (
        f"      api: {{type: {kind}, url: '{revocable_url}', headers: {{Authorization: 'Bearer {TOKEN}'}}}}\n"
    )
    with ToolExecutor(providers(tmp_path, entry), Limits(call_timeout_s=20, retries=0)) as executor:
        (revoked,) = executor.execute([ToolCall("revoke", {"status": status})])
        assert revoked.observation == f"revoked: {status}"
        (refused,) = executor.execute([ToolCall("echo", {"text": "after"})])
    assert refused.error is not None and f"HTTP {status} {reason}" in refused.error
    assert f"HTTP {status} {reason}" in refused.observation
    assert TOKEN not in refused.observation + refused.error + logged(caplog)


def test_windsurf_file_variables_read_the_file_and_an_unreadable_one_fails_at_load(tmp_path: Path) -> None:
    """Windsurf's ``${file:PATH}``: the file's content, stripped of its trailing newline, a secret like an
    expanded variable. It was left as written, so a server got the text ``Bearer ${file:...}``."""
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "search.key").write_text(f"{FILE_KEY}\n")
    absolute = tmp_path / "keys" / "search.key"
    (tmp_path / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "remote": {"serverUrl": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${file:keys/search.key}"}},
                    "local": {"command": "python", "args": ["--key", f"${{file:{absolute}}}"], "env": {"K": "${file:keys/search.key}"}},
                }
            }
        )
    )  # fmt: skip
    env = tmp_path / "env.yaml"
    env.write_text("tools:\n  mcp_config: mcp.json\n")
    servers = load_env_config(env).mcp_servers().mcpServers
    assert servers["remote"].headers == {"Authorization": f"Bearer {FILE_KEY}"}
    assert servers["local"].args == ["--key", FILE_KEY] and servers["local"].env == {"K": FILE_KEY}
    assert redact(f"sent {FILE_KEY}") == "sent ${file:keys/search.key}"

    for written, why in [
        ("keys/missing.key", "No such file or directory"),
        ("${workspaceFolder}/k", "without variables"),
    ]:
        (tmp_path / "mcp.json").write_text(
            json.dumps({"mcpServers": {"s1": {"url": "http://127.0.0.1:1/mcp", "headers": {"X-Key": f"${{file:{written}}}"}}}})
        )  # fmt: skip
        with pytest.raises(EnvConfigError, match=r"MCP server 's1': headers\.X-Key: ") as failure:
            load_env_config(env).mcp_servers()
        assert why in str(failure.value)


@pytest.mark.timeout(60)
def test_a_path_or_a_mode_from_a_variable_is_no_secret_and_reaches_the_model_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Every expanded value was a secret: a server given its corpus folder as ``${RLF_DATA_DIR}`` showed the
    model ``${RLF_DATA_DIR}`` wherever it wrote that folder (and the trajectory log kept the same text), so
    a model that copied a path it read into its next call sent the text ``${RLF_DATA_DIR}/...``."""
    data = tmp_path / "corpus-2026"
    monkeypatch.setenv("RLF_DATA_DIR", str(data))
    monkeypatch.delenv("RLF_MODE", raising=False)
    servers = (
        f"      fs: {{command: python, args: ['{SLOW_SERVER}'],"
        " env: {DATA_DIR: '${RLF_DATA_DIR}', MODE: '${RLF_MODE:-careful-reader}'}}\n"
    )
    with ToolExecutor(providers(tmp_path, servers), Limits(call_timeout_s=20)) as executor:
        folder, mode, echoed = executor.execute(
            [
                ToolCall("getenv", {"name": "DATA_DIR"}),
                ToolCall("getenv", {"name": "MODE"}),
                ToolCall("echo", {"text": f"found {data}/a.txt"}),
            ]
        )
    assert (folder.observation, mode.observation) == (str(data), "careful-reader")
    assert echoed.observation == f"found {data}/a.txt"
    log = TrajectoryLog(tmp_path / "trajectories.jsonl")
    log.write([Trajectory(messages=[{"role": "tool", "content": echoed.observation}])])
    assert read_trajectories(log.path)[0]["messages"][0]["content"] == echoed.observation


def test_values_named_shaped_or_placed_like_credentials_stay_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """What is not redacted any more is only what is neither named like a credential, nor shaped like a
    key, nor in a field that carries one: a key in ``${RLF_SEARCH}``, a pass phrase in a header, after
    ``--api-key`` or under an ``env:`` name like ``TOKEN``, a literal key after ``--token`` or under an
    ``env:`` name like ``SERPER`` and a ``${file:...}`` all stay out of every log line and observation."""
    values = {
        "RLF_SEARCH": "a1b2c3d4e5f6a7b8c9d0",  # shaped like a key
        "RLF_PHRASE": "correct horse battery staple",  # a header value
        "RLF_WORDS": "open-sesame-please",  # after --api-key
        "RLF_PLAIN": "purple-monkey-dish",  # under env TOKEN
        "RLF_API_KEY": "named-like-one",  # an argument of its own, secret by the variable's name
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "key.txt").write_text("filed-away-words\n")
    literal = "literal-arg-words"
    servers = (
        "      s: {command: python, args: ['-c', 'pass', '--api-key', '${RLF_WORDS}', '--token', "
        f"'{literal}', '--search=${{RLF_SEARCH}}', '--file', '${{file:key.txt}}', '${{RLF_API_KEY}}'],"
        " env: {TOKEN: '${RLF_PLAIN}', SERPER: '9f86d081884c7d659a2f'}}\n"
        "      r: {url: 'http://127.0.0.1:1/mcp', headers: {X-Phrase: '${RLF_PHRASE}'}}\n"
    )
    providers(tmp_path, servers)
    hidden = [*values.values(), literal, "filed-away-words", "9f86d081884c7d659a2f"]
    said = "; ".join(f"the server said {value}" for value in hidden)
    logging.getLogger("tests.leak").warning(said)
    with ToolExecutor([PythonProvider([parrot])], Limits()) as executor:
        (record,) = executor.execute([ToolCall("parrot", {"text": said})])
    for text in (redact(said), record.observation, logged(caplog)):
        assert not [value for value in hidden if value in text], text
    assert "${RLF_SEARCH}" in record.observation and "${RLF_PHRASE}" in record.observation


@tool
def parrot(text: str) -> str:
    """Say ``text`` back, as a server that echoes its configuration does.

    Args:
        text: what to say
    """
    return text


def test_error_excerpts_redact_before_they_cut() -> None:
    """A key straddling an excerpt's cut: cut first, its first characters were left for the message."""
    from swift_rlfactory.eval.openai_client import _start
    from swift_rlfactory.redaction import remember
    from swift_rlfactory.tools.mcp.framing import excerpt as _excerpt

    key, token = "sk-excerpt-" + "7f3a" * 6, "tok-" + "q" * 46
    remember(key, "${EXCERPT_KEY}")
    remember(token, "${T}")
    # a judge or eval server's error body, its first 300 characters shown: the key across character 300
    assert key[:8] not in _start("x" * 290 + key)
    # an MCP server's stray line, 200 characters shown: earlier secrets redacted to 4 characters bring
    # a key at byte 790 of the raw line, cut at 800, into them
    line = (token * 15 + "y" * 40 + key).encode()
    assert line.index(key.encode()) == 790
    shown = _excerpt(line)
    assert shown.count("${T}") == 15 and key[:8] not in shown, shown


ARGV_SECRET = "hunter2-argv"  # a secret only by the flag it follows (not named or shaped like one)
TALKATIVE_SERVER = """
import os, sys
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("talkative", log_level="WARNING")
sys.stderr.write(f"usage error: {' '.join(sys.argv[1:])}\\n")
sys.stderr.write(f"env: API_KEY={os.environ['API_KEY']}\\n")
sys.stderr.flush()
sys.stderr.buffer.write(b"bad byte \\xff here\\n")
sys.stderr.buffer.flush()


@mcp.tool()
def shout() -> str:
    '''Print the key on stderr, as a client library's debug line does.'''
    print(f"called with key {os.environ['API_KEY']}", file=sys.stderr, flush=True)
    return "shouted"


@mcp.tool()
def flood(megabytes: float) -> str:
    '''Write ``megabytes`` to stderr without one newline (a progress bar), with the key in it every
    100 000 characters, at every offset a piece could be cut at.'''
    piece = "x" * (100_000 - len(os.environ["API_KEY"])) + os.environ["API_KEY"]
    for _ in range(int(megabytes * 10)):
        sys.stderr.write(piece)
    sys.stderr.flush()
    return "flooded"


@mcp.tool()
def die() -> str:
    '''Exit at once, the key in a last line without a newline (a crash dump cut short).'''
    sys.stderr.write(f"dying with API_KEY={os.environ['API_KEY']}")
    sys.stderr.flush()
    os._exit(1)


mcp.run()
"""


@pytest.mark.timeout(60)
def test_a_stdio_servers_stderr_shows_its_secrets_as_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A server that echoes its command line and environment on stderr, at start-up, in a call and when it
    crashes, prints ``${VAR}`` where the key was, the lines otherwise as they were; one that floods stderr
    with 1 MB without a newline still answers its calls, and the restart after a crash leaks no pipe."""
    monkeypatch.setenv("RLF_ARGV", ARGV_SECRET)
    (tmp_path / "talkative.py").write_text(TALKATIVE_SERVER)
    servers = (
        f"      talk: {{command: python, args: ['{tmp_path / 'talkative.py'}', '--api-key', '${{RLF_ARGV}}'],"
        " env: {API_KEY: '${RLF_SECRET}'}}\n"
    )
    fds = len(os.listdir("/proc/self/fd"))
    with ToolExecutor(providers(tmp_path, servers), Limits(call_timeout_s=20)) as executor:
        shouted, flooded = executor.execute([ToolCall("shout", {}), ToolCall("flood", {"megabytes": 1})])
        assert (shouted.observation, flooded.observation) == ("shouted", "flooded"), flooded.error
        for _ in range(2):  # each crash restarts the server
            assert not executor.execute([ToolCall("die", {})])[0].ok
        assert executor.execute([ToolCall("shout", {})])[0].observation == "shouted"
    assert len(os.listdir("/proc/self/fd")) <= fds
    err = capfd.readouterr().err
    assert SECRET not in err and ARGV_SECRET not in err
    assert "usage error: --api-key ${RLF_ARGV}\n" in err
    assert "env: API_KEY=${RLF_SECRET}\n" in err and "called with key ${RLF_SECRET}\n" in err
    assert "dying with API_KEY=${RLF_SECRET}\n" in err  # the last line, without its newline, at the exit
    assert "bad byte \ufffd here\n" in err
    assert err.count("x" * 99_000 + "${RLF_SECRET}") == 10  # the whole flood, every key redacted


def test_a_line_that_never_ends_is_passed_on_in_pieces_never_cut_inside_a_secret() -> None:
    """However the bytes arrive, a piece cut from an overlong line never splits a key (which would show
    both halves), and at most about twice the cap is held back; a character split between reads stays whole."""
    from swift_rlfactory.tools.mcp.stderr import RedactedLines

    expand("${RLF_SECRET}")
    for offset in range(0, 160, 3):
        text = "é" + "x" * offset + SECRET + "x" * 300
        raw, lines = text.encode(), RedactedLines(cap=100)
        early = "".join(lines.feed(raw[i : i + 7]) for i in range(0, len(raw), 7))
        assert early + lines.finish() == redact(text) + "\n"
        assert len(early) >= len(redact(text)) - 200


PEM_KEY = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\nAQEFAASCBKcwggSjAgEAAoIB\n-----END PRIVATE KEY-----"
SPLIT_WRITER = """
import sys, time
key, pem = sys.argv[1], sys.argv[2]
for head, tail in [
    ("token: " + key[:9], key[9:] + " ok\\n"),  # a read ends mid-key
    ("pem: " + pem[:40], pem[40:] + "\\n"),  # ... mid-key, past a line end inside it
    ("two: " + pem[:28], pem[28:] + "\\n"),  # ... just after a line end inside it
    ("plain line\\n", ""),
]:
    sys.stderr.write(head)
    sys.stderr.flush()
    time.sleep(0.15)
    sys.stderr.write(tail)
    sys.stderr.flush()
"""


def forward(args: list[str], sink: TextIO) -> None:
    """Run ``python -c`` with ``args`` and forward its stderr to ``sink`` until it ends."""
    from swift_rlfactory.tools.mcp.stderr import forward_stderr

    async def main() -> None:
        async with await anyio.open_process([sys.executable, "-c", *args], stderr=subprocess.PIPE) as process:
            assert process.stderr is not None
            done = anyio.Event()
            await forward_stderr(process.stderr, sink, done, "writer")
            assert done.is_set()

    anyio.run(main)


@pytest.mark.timeout(30)
def test_a_secret_split_between_two_writes_of_a_server_is_redacted_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that writes half a key, pauses, then the rest (a read of the pipe ends inside the key) shows
    ``${VAR}``, not the halves; so does a key with line ends in it (a PEM file) cut at or after one of them."""
    monkeypatch.setenv("RLF_PEM_KEY", PEM_KEY)
    expand("${RLF_SECRET} ${RLF_PEM_KEY}")
    sink = io.StringIO()
    forward([SPLIT_WRITER, SECRET, PEM_KEY], sink)
    assert sink.getvalue() == (
        "token: ${RLF_SECRET} ok\npem: ${RLF_PEM_KEY}\ntwo: ${RLF_PEM_KEY}\nplain line\n"
    ), sink.getvalue()


@pytest.mark.timeout(60)
def test_a_stderr_nobody_reads_holds_up_no_tool_call_and_what_it_missed_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our stderr a pipe whose reader has stalled (a full pipe, a frozen terminal): a server that floods its
    stderr still answers at once, and so does a second call beside it; what could not be held is dropped,
    and said once, with a count, when the reader is back, the secrets still redacted."""
    from swift_rlfactory.tools.mcp import stderr as server_stderr

    monkeypatch.setattr(server_stderr, "HELD_CHARS", 200_000)
    (tmp_path / "talkative.py").write_text(TALKATIVE_SERVER)
    script = tmp_path / "talkative.py"
    servers = f"      talk: {{command: python, args: ['{script}'], env: {{API_KEY: '${{RLF_SECRET}}'}}}}\n"
    read_end, write_end = os.pipe()
    reader_back, seen = threading.Event(), []

    def read() -> None:
        reader_back.wait(timeout=8)  # the old forwarder held every call until here
        with os.fdopen(read_end, "rb") as pipe:
            seen.append(pipe.read().decode())

    thread = threading.Thread(target=read)
    thread.start()
    with os.fdopen(write_end, "w") as ours:
        monkeypatch.setattr(sys, "stderr", ours)
        with ToolExecutor(providers(tmp_path, servers), Limits(call_timeout_s=20)) as executor:
            started = time.monotonic()
            flooded, shouted = executor.execute([ToolCall("flood", {"megabytes": 2}), ToolCall("shout", {})])
            took = time.monotonic() - started
            reader_back.set()
            assert (flooded.observation, shouted.observation) == ("flooded", "shouted"), flooded.error
        monkeypatch.undo()
    thread.join(timeout=10)
    assert took < 4, f"the calls waited {took:.1f}s for our stderr"
    err = seen[0]
    assert SECRET not in err and "env: API_KEY=${RLF_SECRET}\n" in err
    dropped = [line for line in err.splitlines() if "dropped" in line]
    assert len(dropped) == 1 and "[MCP server talk#0: " in dropped[0], dropped


def test_a_secret_percent_encoded_or_in_base64_shows_as_its_variable_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server logs what it sends: a credential in a URL path is percent-encoded, and ``user:password``
    (ours, or a URL's) goes out as ``Authorization: Basic`` and base64."""
    value = "rlf-user:p@ss/w0rd+x"
    monkeypatch.setenv("RLF_BASIC_AUTH", value)
    expand("${RLF_BASIC_AUTH}")
    remember_url("https://ann:s3cret-pw@host/mcp")
    assert redact(f"Authorization: Basic {b64(value)}") == "Authorization: Basic ${RLF_BASIC_AUTH}"
    assert redact(f"GET /login/{quote(value, safe='')} 200") == "GET /login/${RLF_BASIC_AUTH} 200"
    assert redact(f"Authorization: Basic {b64('ann:s3cret-pw')}") == "Authorization: Basic ***"


def b64(text: str) -> str:
    """``text`` in standard base64, as an ``Authorization: Basic`` header carries it."""
    return base64.b64encode(text.encode()).decode()
