"""OAuth for remote MCP servers (docs/mcp.md, "OAuth"), against a real OAuth-protected server on 127.0.0.1
(tests/servers/oauth_server.py, the SDK's authorization server): discovery, dynamic registration, PKCE and
the headless authorization; the token store reused and refreshed by a later run; the client-credentials
grant with a secret from a variable that no log or error shows; a login page failing a headless run in
one line, and ``tools login`` answering it once for later runs; the ``auth`` setting checked at load."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml
from pydantic import ValidationError

from swift_rlfactory.env.config import EnvConfigError, load_env_config
from swift_rlfactory.tools import Limits, ToolCall, ToolExecutor
from swift_rlfactory.tools.mcp import McpProvider
from swift_rlfactory.tools.mcp.config import McpServerConfig

from .conftest import wait_for_port
from .test_mcp import free_port
from .test_serve_agent import environ

SERVER = Path(__file__).parent / "servers" / "oauth_server.py"
CLI = [sys.executable, "-m", "swift_rlfactory.cli", "tools"]
SECRET = "robot-secret-7f3a9c21e4b8d605"


@contextmanager
def oauth_server(*flags: str) -> Iterator[str]:
    """The OAuth-protected server on a free port: its MCP URL (``/sse`` with ``--transport sse``) once it
    accepts connections."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--port", str(port), *flags], stderr=subprocess.DEVNULL
    )
    try:
        wait_for_port(port, proc, timeout_s=30)
        yield f"http://127.0.0.1:{port}/{'sse' if 'sse' in flags else 'mcp'}"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def env_file(folder: Path, url: str, auth: object) -> Path:
    server = {"url": url, "auth": auth}
    path = folder / "env.yaml"
    path.write_text(yaml.safe_dump({"name": "remote", "tools": {"mcp": {"mcpServers": {"remote": server}}}}))
    return path


def tools(*args: str, cache: Path, **extra: str) -> subprocess.CompletedProcess:
    env = environ(RLFACTORY_CACHE=str(cache), **extra)
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=env)


def test_discovery_registration_pkce_then_a_later_run_reuses_and_refreshes_the_stored_tokens(tmp_path: Path):
    """A URL alone: the 401 leads to the metadata, a registration and an authorization approved at once;
    the tokens go to a 0600 file in the cache folder. The next run registers and authorizes nothing: its
    stored token expired (2 s), so it is refreshed."""
    cache = tmp_path / "cache"
    with oauth_server("--ttl", "2") as url:
        first = tools("call", url, "whoami", cache=cache)
        assert first.returncode == 0, first.stderr
        (store,) = (cache / "mcp-oauth").glob("*.json")
        assert stat.S_IMODE(store.stat().st_mode) == 0o600
        assert json.loads(store.read_text())["tokens"]["access_token"].startswith("at-")
        time.sleep(2.5)
        second = tools("call", url, "stats", cache=cache)
    assert second.returncode == 0, second.stderr
    # beside the store only the lock that processes sharing it refresh under (empty, 0600 too)
    assert [p.name for p in store.parent.iterdir() if p != store] == [f".{store.name}.lock"]
    assert stat.S_IMODE(store.with_name(f".{store.name}.lock").stat().st_mode) == 0o600
    seen = json.loads(second.stdout.splitlines()[0])
    assert seen == {"registrations": 1, "authorizations": 1, "code_exchanges": 1, "refreshes": 1}


def test_the_sse_transport_authorizes_too(tmp_path: Path):
    """The older HTTP+SSE transport (``type: sse``) goes through the same OAuth client."""
    with oauth_server("--transport", "sse") as url:
        path = tmp_path / "env.yaml"
        server = {"url": url, "type": "sse", "auth": "oauth"}
        path.write_text(
            yaml.safe_dump({"name": "remote", "tools": {"mcp": {"mcpServers": {"remote": server}}}})
        )
        called = tools("call", str(path), "stats", cache=tmp_path / "cache")
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout.splitlines()[0]) == {
        "registrations": 1,
        "authorizations": 1,
        "code_exchanges": 1,
    }


def test_sessions_of_a_server_share_one_authorization_and_one_refresh_and_still_call_in_parallel(
    tmp_path: Path,
):
    """Four sessions: one registration and authorization, not four; once the token expired (2 s), one
    refresh (the server rotates refresh tokens: a second refresh of the same one would fail); and calls
    still run side by side (16 x 0.5 s, serial: 8 s)."""
    auth = {"type": "oauth", "token_store": str(tmp_path / "tokens.json")}
    with oauth_server("--ttl", "2") as url:
        config = McpServerConfig.model_validate({"url": url, "auth": auth, "sessions": 4}).resolved(tmp_path)
        with ToolExecutor([McpProvider("remote", config)], Limits(call_timeout_s=30)) as executor:
            began = time.monotonic()
            waited = executor.execute([ToolCall("wait", {"seconds": 0.5})] * 16)
            elapsed = time.monotonic() - began
            time.sleep(2.5)
            executor.execute([ToolCall("wait", {"seconds": 0.1})] * 8)
            [stats] = executor.execute([ToolCall("stats", {})])
    assert all(r.observation == "waited" for r in waited) and elapsed < 4.0, (elapsed, waited[0])
    seen = json.loads(stats.observation)
    assert seen == {"registrations": 1, "authorizations": 1, "code_exchanges": 1, "refreshes": 1}


def test_without_auth_a_401_still_fails_the_start_naming_the_status(tmp_path: Path):
    """An environment file's server without ``auth`` is spoken to as before: no OAuth is tried."""
    with oauth_server() as url:
        path = tmp_path / "env.yaml"
        path.write_text(
            yaml.safe_dump({"name": "remote", "tools": {"mcp": {"mcpServers": {"remote": {"url": url}}}}})
        )
        listed = tools("list", str(path), cache=tmp_path / "cache")
        seen = tools("list", url, cache=tmp_path / "cache")  # the URL alone does OAuth, and says so
    assert listed.returncode != 0 and "401" in listed.stderr, listed.stderr
    assert seen.returncode == 0, seen.stderr


def test_client_credentials_secret_from_a_variable_reaches_no_log_or_error(tmp_path: Path):
    """``grant: client_credentials`` with ``client_secret: ${ROBOT_SECRET}``: the call is made as the robot,
    and with every logger at DEBUG neither the secret, its Basic form nor the access token is written; a
    wrong secret fails the start with the server's refusal, not showing the secret either."""
    auth = {"type": "oauth", "grant": "client_credentials", "client_id": "training-robot"}
    logged = (
        "import logging, sys; logging.basicConfig(level=logging.DEBUG); "
        "from swift_rlfactory.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    with oauth_server("--client-secret", SECRET) as url:
        path = env_file(tmp_path, url, {**auth, "client_secret": "${ROBOT_SECRET}", "scopes": "mcp"})
        env = environ(RLFACTORY_CACHE=str(tmp_path / "cache"), ROBOT_SECRET=SECRET)
        run = [sys.executable, "-c", logged, "tools", "call", str(path), "whoami"]
        good = subprocess.run(run, capture_output=True, text=True, timeout=120, env=env)
        wrong = "wrong-secret-0b1c2d3e4f5a6b7c"
        bad = subprocess.run(
            run,
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, "ROBOT_SECRET": wrong, "RLFACTORY_CACHE": str(tmp_path / "other")},
        )
    assert good.returncode == 0 and good.stdout.startswith("training-robot"), good.stderr[-3000:]
    assert "DEBUG:mcp.client.streamable_http" in good.stderr  # the DEBUG logs were on
    (store,) = (tmp_path / "cache" / "mcp-oauth").glob("*.json")
    token = json.loads(store.read_text())["tokens"]["access_token"]
    basic = __import__("base64").b64encode(f"training-robot:{SECRET}".encode()).decode()
    for leak in (SECRET, basic, token):
        assert leak not in good.stdout + good.stderr
    assert bad.returncode != 0 and "invalid_client" in bad.stderr, bad.stderr[-3000:]
    assert wrong not in bad.stdout + bad.stderr


def test_a_login_page_fails_a_headless_run_in_one_line_and_tools_login_answers_it_for_later_runs(
    tmp_path: Path,
):
    """A server that shows a login page instead of redirecting back: the run fails saying to log in once.
    ``tools login`` prints the URL and waits on the callback port; a person (here: this test) approves,
    and a later headless run uses the stored tokens without authorizing again."""
    cache, port = tmp_path / "cache", free_port()
    with oauth_server("--consent") as url:
        path = env_file(tmp_path, url, {"type": "oauth", "callback_port": port})
        refused = tools("list", str(path), cache=cache)
        login = subprocess.Popen(
            [*CLI, "login", str(path)],
            stdout=subprocess.PIPE,
            text=True,
            env=environ(RLFACTORY_CACHE=str(cache)),
        )
        try:
            assert login.stdout is not None
            authorize = next(line for line in login.stdout if line.startswith("http"))
            page = httpx.get(authorize.strip(), follow_redirects=True, timeout=30)
            approve = re.search(r'href="([^"]+)"', page.text)
            assert approve, page.text
            back = httpx.get(str(page.url.join(approve[1])), follow_redirects=True, timeout=30)
            rest, _ = login.communicate(timeout=60)
        finally:
            login.kill()
        later = tools("call", str(path), "stats", cache=cache)
    assert refused.returncode == 2, refused.stderr
    assert "tools login" in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "authorization received" in back.text and login.returncode == 0, rest
    assert later.returncode == 0, later.stderr
    assert json.loads(later.stdout.splitlines()[0])["authorizations"] == 2  # the refused one and the login


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        ("basic", "'auth' must be 'oauth'"),
        ({"type": "oauth", "grant": "client_credentials"}, "needs 'client_id' and 'client_secret'"),
        ({"type": "oauth", "grant": "password"}, "auth.grant"),
        ({"type": "oauth", "client_secret": SECRET}, "needs the 'client_id'"),
        ({"type": "oauth", "client_id": "x", "client_secret": SECRET, "scope": "a"}, "auth.scope"),
        ({"type": "oauth", "client_id": "x", "private_key": SECRET}, "is for grant client_credentials"),
        (
            {
                "type": "oauth",
                "grant": "client_credentials",
                "client_id": "x",
                "client_secret": SECRET,
                "private_key": SECRET,
            },
            "without a secret",
        ),
    ],
)
def test_the_auth_setting_is_checked_at_load_naming_the_field_never_the_secret(
    tmp_path: Path, auth: object, message: str
):
    with pytest.raises(EnvConfigError) as failed:
        load_env_config(env_file(tmp_path, "https://example.com/mcp", auth)).mcp_servers()
    text = str(failed.value)
    assert message in text and SECRET not in text, text


def test_auth_is_for_remote_servers_and_an_entry_without_it_dumps_as_before():
    with pytest.raises(ValidationError, match="'auth' .* is for a remote server"):
        McpServerConfig.model_validate({"command": "python", "auth": "oauth"})
    assert "auth" not in McpServerConfig.model_validate({"url": "https://example.com/mcp"}).model_dump()


@pytest.mark.parametrize(
    "entry",
    [
        {"url": "https://x.example/mcp", "auth": {"CLIENT_ID": "app", "CLIENT_SECRET": "s", "scopes": ["a"]}},
        {"httpUrl": "https://x.example/mcp", "oauth": {"enabled": True, "clientId": "app", "clientSecret": "s",
                                                       "tokenUrl": "https://x.example/t", "scopes": ["a"]}},
    ],
    ids=["cursor", "gemini"],
)  # fmt: skip
def test_other_clients_oauth_settings_are_our_auth(entry: dict):
    """Cursor's ``auth`` and Gemini CLI's ``oauth`` name the same client: one ``auth`` setting."""
    auth = McpServerConfig.model_validate(entry).auth
    assert auth is not None
    assert (auth.client_id, auth.client_secret, auth.scopes) == ("app", "s", ["a"])


def test_claude_codes_oauth_and_geminis_disabled_one():
    claude = McpServerConfig.model_validate(
        {"url": "https://x.example/mcp", "oauth": {"clientId": "app", "callbackPort": 8080}}
    )
    assert claude.auth is not None and (claude.auth.client_id, claude.auth.callback_port) == ("app", 8080)
    for off in ({"enabled": False}, False):
        assert McpServerConfig.model_validate({"url": "https://x.example/mcp", "oauth": off}).auth is None
    on = McpServerConfig.model_validate({"url": "https://x.example/mcp", "oauth": True}).auth
    assert on is not None and (on.grant, on.client_id) == ("authorization_code", None)


def test_processes_sharing_a_token_store_refresh_once_on_a_server_that_rotates_refresh_tokens(tmp_path: Path):
    """Four processes (ranks, say) start with the stored token past its expiry, and a refresh takes 3 s: the
    first refreshes, the others wait for the store's lock and read the tokens it stored. Each used to
    refresh its own copy; on this server (which rotates refresh tokens) all but one then spent a dead
    refresh token and fell back to a new authorization, which a real login page would have refused."""
    cache = tmp_path / "cache"
    with oauth_server("--refresh-delay", "3") as url:
        assert tools("call", url, "whoami", cache=cache).returncode == 0
        (store,) = (cache / "mcp-oauth").glob("*.json")
        data = json.loads(store.read_text())
        store.write_text(json.dumps({**data, "expires_at": time.time() - 1}))  # expired for the client only
        env = environ(RLFACTORY_CACHE=str(cache))
        procs = [
            subprocess.Popen([*CLI, "call", url, "whoami"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
            for _ in range(4)
        ]  # fmt: skip
        ended = [(proc.communicate(timeout=120)[1], proc.returncode) for proc in procs]
        stats = tools("call", url, "stats", cache=cache)
    assert [code for _, code in ended] == [0] * 4, [err[-500:] for err, _ in ended]
    seen = json.loads(stats.stdout.splitlines()[0])
    assert seen == {"registrations": 1, "authorizations": 1, "code_exchanges": 1, "refreshes": 1}
