"""What real clients' config files mean beyond how a server starts: tool filters, Gemini CLI's server
lists, the unit of a bare ``timeout``, the folder relative paths start from, a byte order mark, and the
start-up errors a hand-written entry meets. Tools and start-up failures are checked on real servers
(``tests/servers/``) started as subprocesses, the way training starts them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from swift_rlfactory.env.config import EnvConfigError, load_env_config
from swift_rlfactory.tools import ToolCall, ToolExecutor
from swift_rlfactory.tools.mcp import McpProvider, mcp_providers
from swift_rlfactory.tools.mcp.config import McpConfig, McpServerConfig
from tests.faults.test_secrets import serve_auth
from tests.test_mcp import SLOW_SERVER

SLOW = {"command": "python", "args": [str(SLOW_SERVER)]}


def env_for(config: Path, tmp_path: Path) -> Path:
    """An environment file elsewhere that points at ``config``, as a user's would."""
    env = tmp_path / "envs" / "x" / "env.yaml"
    env.parent.mkdir(parents=True, exist_ok=True)
    env.write_text(f"tools:\n  mcp_config: {config}\n")
    return env


def write(path: Path, data: object, prefix: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(prefix + json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.timeout(60)
def test_tool_filters_keep_tools_from_the_model_and_from_calls(tmp_path: Path) -> None:
    """Gemini CLI's includeTools/excludeTools (exclude wins) and Roo's disabledTools, on real servers."""
    settings = {
        "mcpServers": {
            "gem": {**SLOW, "includeTools": ["echo", "pid", "getenv"], "excludeTools": ["getenv"]},
            "roo": {**SLOW, "disabledTools": ["crash", "block", "big", "getenv", "count", "shape", "find"]},
        }
    }
    config = load_env_config(env_for(write(tmp_path / ".gemini" / "settings.json", settings), tmp_path))
    with ToolExecutor(mcp_providers(config.mcp_servers())) as executor:
        names = set(executor.tools)
        assert names == {"echo", "pid", "roo_echo", "roo_pid", "sleep", "fail"}
        assert {s["function"]["name"] for s in executor.schemas()} == names
        hidden, shown = executor.execute(
            [ToolCall("getenv", {"name": "HOME"}), ToolCall("echo", {"text": "a"})]
        )
        assert not hidden.ok and "getenv" in hidden.observation and shown.observation == "a"


@pytest.mark.parametrize(
    ("entry", "field", "name"),
    [
        ({"includeTools": ["echo", "ecko"]}, "includeTools", "ecko"),
        ({"excludeTools": ["write_file"]}, "excludeTools", "write_file"),
        ({"disabledTools": ["rm"]}, "disabledTools", "rm"),
    ],
)
@pytest.mark.timeout(60)
def test_a_filter_naming_a_tool_the_server_lacks_fails_at_start_naming_the_field(
    entry: dict, field: str, name: str
) -> None:
    """A misspelt excludeTools entry would hand the model the tool it was meant to hide: fail, loudly."""
    provider = McpProvider("fs", McpServerConfig.model_validate({**SLOW, **entry}))
    with pytest.raises(RuntimeError, match=rf"MCP server 'fs': .*{field}.* '{name}'.*offers: .*echo"):
        ToolExecutor([provider]).start()


def test_filters_of_the_wrong_type_fail_at_load_naming_the_key() -> None:
    for entry, key in (({"excludeTools": "getenv"}, "excludeTools"), ({"includeTools": [1]}, "includeTools")):
        with pytest.raises(ValueError, match=rf"'{key}' must be a list of tool names"):
            McpServerConfig.model_validate({**SLOW, **entry})
    with pytest.raises(ValueError, match="one allowlist"):
        McpServerConfig.model_validate({**SLOW, "includeTools": [], "enabled_tools": []})
    assert McpServerConfig.model_validate({**SLOW, "includeTools": []}).select_tools(["a", "b"]) == []


def test_gemini_settings_json_loads_with_its_mcp_block_honoured(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Gemini CLI's global ``mcp`` block is settings (which servers to connect to), not opencode's servers."""
    settings = {
        "theme": "GitHub",
        "general": {"vimMode": False},
        "mcp": {"allowed": ["a", "b", "elsewhere"], "excluded": ["b"], "serverCommand": "srv --stdio"},
        "mcpServers": {name: dict(SLOW) for name in "abc"},
    }
    with caplog.at_level(logging.INFO, logger="swift_rlfactory.tools.mcp.config"):
        servers = load_env_config(
            env_for(write(tmp_path / "settings.json", settings), tmp_path)
        ).mcp_servers()
    assert list(servers.mcpServers) == ["a"]
    assert "elsewhere" in caplog.text and "serverCommand" in caplog.text
    older = {"allowMCPServers": ["a", "c"], "excludeMCPServers": ["c"], "mcpServers": settings["mcpServers"]}
    assert list(McpConfig.model_validate(older).mcpServers) == ["a"]
    assert list(
        McpConfig.model_validate({"mcp": {"excluded": ["a"]}, "mcpServers": older["mcpServers"]}).mcpServers
    ) == ["b", "c"]
    # opencode's "mcp" is still a server map, and a file mixing the two says so
    opencode = McpConfig.model_validate({"mcp": {"allowed": {"type": "local", "command": ["python"]}}})
    assert list(opencode.mcpServers) == ["allowed"]
    with pytest.raises(ValueError, match="'mcp' mixes Gemini CLI's settings \\(excluded\\)"):
        McpConfig.model_validate(
            {"mcp": {"excluded": ["x"], "srv": {"type": "local", "command": ["python"]}}}
        )
    with pytest.raises(ValueError, match="'mcp.allowed' must be a list of server names"):
        McpConfig.model_validate({"mcp": {"allowed": "a"}, "mcpServers": {}})


@pytest.mark.parametrize(
    ("file", "entry", "seconds"),
    [
        (".gemini/settings.json", {"timeout": 3000}, 3.0),  # Gemini CLI: milliseconds, by its folder
        ("settings.json", {"timeout": 3000, "trust": True}, 3.0),  # ... by a key only it writes
        ("opencode.json", {"timeout": 3000}, 3.0),
        (".roo/mcp.json", {"timeout": 600}, 600.0),  # Roo: seconds
        ("cline_mcp_settings.json", {"timeout": 20000}, 20000.0),  # Cline: seconds, whatever the value
        ("mcp.json", {"timeout": 600, "alwaysAllow": []}, 600.0),
        ("mcp.json", {"timeout": 60000}, 60.0),  # no dialect, but only milliseconds make sense
        ("mcp.json", {"timeout": 45}, 45.0),
    ],
)
def test_a_bare_timeout_takes_the_unit_of_the_files_dialect(
    file: str, entry: dict, seconds: float, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        path = write(tmp_path / file, {"mcpServers": {"s": {**SLOW, **entry}}})
        server = load_env_config(env_for(path, tmp_path)).mcp_servers().mcpServers["s"]
    assert server.call_timeout_s == seconds
    assert "timeout" not in caplog.text


@pytest.mark.parametrize(("value", "read"), [(3000, "3000 s"), (3601, "3.601 s")])
def test_an_ambiguous_bare_timeout_is_warned_about_once(
    value: int, read: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """3000 may be Cline's 50 minutes or Claude Code's 3 seconds, and 3600 -> 3601 jumps from an hour to
    3.6 s: the rule stays, but the run says how it read the value, once."""
    env = env_for(
        write(tmp_path / ".mcp.json", {"mcpServers": {f"amb{value}": {**SLOW, "timeout": value}}}), tmp_path
    )
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            load_env_config(env).mcp_servers()
    warnings = [r.getMessage() for r in caplog.records if "bare 'timeout" in r.getMessage()]
    assert len(warnings) == 1 and read in warnings[0] and "timeout_s or timeout_ms" in warnings[0]


def test_each_problem_of_a_config_file_is_warned_about_once_and_again_in_another_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Loading an environment read its ``mcp_config`` twice (the loader, then the environment's servers),
    so an unknown key was warned about twice; the module-wide sets that kept other warnings to one also
    kept quiet about the same server, with the same problem, in a second file."""
    from swift_rlfactory.env.environment import Environment

    entry = {**SLOW, "timeout": 3000, "futureKey": 1}
    envs = [
        env_for(write(tmp_path / name / "mcp.json", {"mcpServers": {"same": entry}}), tmp_path / name)
        for name in ("one", "two")
    ]
    with caplog.at_level(logging.WARNING):
        for env in [*envs, envs[0]]:  # the first file again: its problems are told already
            Environment.load(env).close()
    said = [r.getMessage() for r in caplog.records]
    assert sum("unknown server key 'futureKey'" in line for line in said) == 2, said
    assert sum("bare 'timeout: 3000'" in line for line in said) == 2, said


def test_paths_in_a_config_file_start_from_its_workspace(tmp_path: Path) -> None:
    """``${workspaceFolder}``, relative paths and the default cwd of ``proj/.vscode/mcp.json`` mean ``proj``,
    whatever folder the environment file sits in; an inline server keeps the environment's folder."""
    proj = tmp_path / "proj"
    (proj / "keys").mkdir(parents=True)
    (proj / "tools").mkdir()
    (proj / "keys" / "token").write_text("tok-123\n")
    (proj / ".env").write_text("FROM=proj\n")
    vscode = {
        "servers": {
            "edge": {
                "command": "python",
                "args": ["${workspaceFolder}/edge_server.py"],
                "envFile": ".env",
                "env": {"TOKEN": "${file:keys/token}"},
            },
            "sub": {"command": "python", "cwd": "tools"},
        }
    }
    write(proj / ".vscode" / "mcp.json", vscode)
    env = env_for(Path("../../proj/.vscode/mcp.json"), tmp_path)
    env.write_text(
        env.read_text() + "  mcp:\n    mcpServers:\n      inline: {command: python, args: [s.py]}\n"
    )
    servers = load_env_config(env).mcp_servers().mcpServers
    assert servers["edge"].args == [f"{proj}/edge_server.py"] and servers["edge"].cwd == str(proj)
    assert servers["edge"].env == {"FROM": "proj", "TOKEN": "tok-123"}
    assert servers["sub"].cwd == str(proj / "tools")
    assert servers["inline"].cwd == str(env.parent)
    continue_dir = write(
        proj / ".continue" / "mcpServers" / "db.json", {"mcpServers": {"db": {"command": "python"}}}
    )
    assert load_env_config(env_for(continue_dir, tmp_path)).mcp_servers().mcpServers["db"].cwd == str(proj)


@pytest.mark.parametrize("prefix", ["", "// Windows editor\n"])
def test_json_and_jsonc_files_with_a_byte_order_mark_load(prefix: str, tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", {"mcpServers": {"s": SLOW}}, prefix="\ufeff" + prefix)
    (tmp_path / "bom.env").write_text("\ufeffKEY=v\n", encoding="utf-8")
    text = path.read_text(encoding="utf-8").replace('"args"', '"envFile": "bom.env", "args"')
    path.write_text(text, encoding="utf-8")
    assert load_env_config(env_for(path, tmp_path)).mcp_servers().mcpServers["s"].env == {"KEY": "v"}


def test_a_cwd_with_a_tilde_is_the_home_folder() -> None:
    server = McpServerConfig(command="python", cwd="~/").resolved(Path("/somewhere"))
    assert server.cwd == str(Path.home())


@pytest.mark.timeout(30)
def test_a_cwd_that_does_not_exist_fails_at_start_naming_cwd(tmp_path: Path) -> None:
    config = McpServerConfig(**SLOW, cwd="no/such/dir").resolved(tmp_path)
    with pytest.raises(
        RuntimeError, match=rf"MCP server 'w' cannot start: cwd {tmp_path}/no/such/dir does not exist"
    ):
        ToolExecutor([McpProvider("w", config)]).start()


@pytest.mark.timeout(30)
def test_a_command_line_in_command_says_how_to_split_it(tmp_path: Path) -> None:
    config = McpServerConfig(command=f"python {SLOW_SERVER} --transport stdio", args=["-v"])
    # (\S+: another test's secret may be the text "python", and errors are redacted)
    hint = r"Did you mean command: \S+, args: " + re.escape(
        f'["{SLOW_SERVER}", "--transport", "stdio", "-v"]?'
    )
    with pytest.raises(
        RuntimeError, match=rf"MCP server 'cmd' cannot start: command .* is not a program.*{hint}"
    ):
        ToolExecutor([McpProvider("cmd", config)]).start()
    with pytest.raises(RuntimeError, match="names no program on PATH"):  # no hint: the first word is none
        ToolExecutor([McpProvider("cmd", McpServerConfig(command="no-such-program x.js"))]).start()


@pytest.mark.timeout(60)
def test_a_command_that_names_no_program_fails_at_load_naming_server_and_command(tmp_path: Path) -> None:
    """A misspelt ``command`` failed only when the servers started - in a trainer, after the model was
    loaded. Now the loader looks it up as the OS will: on the server's PATH (its ``env:`` may set one), or,
    for a path, from its ``cwd``; a program found that way loads, and starts."""
    tools = tmp_path / "tools"
    tools.mkdir()
    script = tools / "run.sh"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {SLOW_SERVER}\n")
    script.chmod(0o755)
    (tools / "slow-server").symlink_to(script)
    bad = {
        "nodee": ({"command": "nodee", "args": ["x.js"]}, "command 'nodee' names no program on PATH"),
        "script": ({"command": "./missing.sh", "cwd": str(tools)}, "command './missing.sh' is no executable"),
        "path": ({"command": "slow-server"}, "command 'slow-server' names no program on PATH"),
    }
    for name, (entry, message) in bad.items():
        env = env_for(write(tmp_path / name / "mcp.json", {"mcpServers": {name: entry}}), tmp_path / name)
        with pytest.raises(EnvConfigError, match=rf"MCP server '{name}': {re.escape(message)}"):
            load_env_config(env)
    good = {
        "script": {"command": "./run.sh", "cwd": "tools"},
        "path": {"command": "slow-server", "env": {"PATH": f"{tools}:{os.environ['PATH']}"}},
    }
    env = env_for(write(tmp_path / "good" / "mcp.json", {"mcpServers": good}), tmp_path / "good")
    (tmp_path / "good" / "tools").symlink_to(tools)
    with ToolExecutor(mcp_providers(load_env_config(env).mcp_servers())) as executor:
        records = executor.execute([ToolCall("echo", {"text": "a"}), ToolCall("path_echo", {"text": "b"})])
    assert [r.observation for r in records] == ["a", "b"], records


@pytest.mark.parametrize(
    ("url", "given"),
    [("localhost:8000/mcp", "it has none"), ("ws://127.0.0.1:1/mcp?k=${RLF_WS_KEY}", "ws://")],
)
def test_a_url_that_is_not_http_fails_at_load_without_showing_it(
    url: str, given: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It failed when the servers started (httpx's "missing an 'http://' or 'https://' protocol"), after the
    model was loaded; the url is not shown, since it may carry a key."""
    monkeypatch.setenv("RLF_WS_KEY", "ws-key-never-shown")
    env = env_for(write(tmp_path / "mcp.json", {"mcpServers": {"remote": {"url": url}}}), tmp_path)
    with pytest.raises(
        EnvConfigError, match=rf"MCP server 'remote': url must start with http:// .*{given}"
    ) as err:
        load_env_config(env)
    assert "ws-key-never-shown" not in str(err.value) and "8000" not in str(err.value)


@pytest.mark.timeout(30)
def test_a_start_up_timeout_names_startup_timeout_s() -> None:
    config = McpServerConfig(
        command="python", args=["-c", "import time; time.sleep(60)"], startup_timeout_s=1
    )
    executor = ToolExecutor([McpProvider("mute", config)])
    with pytest.raises(RuntimeError, match=r"within 1 s \(startup_timeout_s"):
        executor.start()
    executor.close()


# The token the auth server here wants: one of this module's own, since a recorded secret keeps the first
# name it was recorded under for the whole test process (test_secrets.py checks TOKEN's).
AUTH_TOKEN = "tok-dialects-3b7e91-bearer"


@pytest.fixture(scope="module")
def auth_url() -> Iterator[str]:
    """The slow server over streamable HTTP, answering 401 to any request without ``Bearer AUTH_TOKEN``."""
    yield from serve_auth(token=AUTH_TOKEN)


def codex_toml(auth_url: str) -> str:
    """A ``~/.codex/config.toml`` as Codex writes it: its own settings around the ``[mcp_servers.*]`` tables."""
    return f"""\
model = "gpt-5-codex"
approval_policy = "on-request"
sandbox_mode = "workspace-write"

[profiles.fast]
model = "o4-mini"

[projects."/home/me/proj"]
trust_level = "trusted"

[mcp_servers.local]
command = "python"
args = ["{SLOW_SERVER}"]
env = {{ "RLF_CODEX_MODE" = "fast", "PORT" = 8000 }}
cwd = "srv"
startup_timeout_sec = 20
tool_timeout_sec = 45.5
enabled_tools = ["echo", "getenv"]

[mcp_servers.legacy]
command = "python"
args = ["{SLOW_SERVER}"]
startup_timeout_ms = 15000
disabled_tools = ["crash", "block", "big", "getenv", "count", "shape", "sleep", "fail", "pid", "find"]
required = true

[mcp_servers.parked]
command = "does-not-exist"
enabled = false

[mcp_servers.api]
url = "{auth_url}"
bearer_token_env_var = "RLF_CODEX_BEARER"
http_headers = {{ "X-Team" = "core", "authorization" = "Bearer replaced-by-the-token" }}
default_tools_approval_mode = "approve"
enabled_tools = ["echo"]

[mcp_servers.api.tools.echo]
approval_mode = "approve"

[mcp_servers.api2]
url = "{auth_url}"
env_http_headers = {{ "Authorization" = "RLF_CODEX_AUTH_HEADER" }}
enabled_tools = ["echo"]
"""


@pytest.mark.timeout(90)
def test_a_codex_config_toml_loads_and_its_servers_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, auth_url: str
) -> None:
    """Codex keeps its servers in TOML, under ``[mcp_servers.NAME]``, beside its own settings; a url is
    streamable HTTP, with the token named by ``bearer_token_env_var`` or a header by ``env_http_headers``."""
    monkeypatch.setenv("RLF_CODEX_BEARER", AUTH_TOKEN)
    monkeypatch.setenv("RLF_CODEX_AUTH_HEADER", f"Bearer {AUTH_TOKEN}")
    (tmp_path / "proj" / "srv").mkdir(parents=True)
    config = tmp_path / "proj" / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(codex_toml(auth_url))
    with caplog.at_level(logging.DEBUG):
        loaded = load_env_config(env_for(config, tmp_path))
        servers = loaded.mcp_servers().mcpServers
    assert list(servers) == ["local", "legacy", "api", "api2"]
    local, legacy, api = servers["local"], servers["legacy"], servers["api"]
    assert local.env == {"RLF_CODEX_MODE": "fast", "PORT": "8000"}
    assert local.cwd == str(tmp_path / "proj" / "srv")  # .codex/ is the client's folder in the project
    assert (local.startup_timeout_s, local.call_timeout_s) == (20, 45.5)
    assert legacy.startup_timeout_s == 15 and api.kind == "streamable-http"
    assert api.headers == {"X-Team": "core", "Authorization": f"Bearer {AUTH_TOKEN}"}
    assert "unknown server key" not in caplog.text
    with ToolExecutor(mcp_providers(loaded.mcp_servers())) as executor:
        assert set(executor.tools) == {"echo", "getenv", "legacy_echo", "api_echo", "api2_echo"}
        records = executor.execute(
            [
                ToolCall("getenv", {"name": "RLF_CODEX_MODE"}),
                ToolCall("api_echo", {"text": "bearer"}),
                ToolCall("api2_echo", {"text": "header"}),
            ]
        )
    assert [r.observation for r in records] == ["fast", "bearer", "header"], records
    assert AUTH_TOKEN not in "\n".join(r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('command = "python"\nargs = "server.py"', r"mcp_servers\.docs\.args: Input should be a valid list"),
        ('command = "python"\nstartup_timeout_sec = "soon"', r"mcp_servers\.docs\.startup_timeout_sec: "),
        ('command = "python"\ntool_timeout_sec = -1', r"mcp_servers\.docs\.tool_timeout_sec: .*greater than 0"),
        ('command = "python"\nstartup_timeout_ms = "x"', r"mcp_servers\.docs: .*'startup_timeout_ms' must be"),
        ('url = "http://127.0.0.1:1/mcp"\nbearer_token_env_var = 3', r"mcp_servers\.docs\.bearer_token_env_var: "),
        ('url = "http://127.0.0.1:1/mcp"\nbearer_token_env_var = "Bearer sk-live-4417aa"',
         r"mcp_servers\.docs\.bearer_token_env_var: .*must name an environment variable"),
        ('url = "http://127.0.0.1:1/mcp"\nbearer_token_env_var = "RLF_UNSET"',
         r"MCP server 'docs': bearer_token_env_var: environment variable RLF_UNSET is not set"),
        ('url = "http://127.0.0.1:1/mcp"\nenv_http_headers = { "X-Key" = "RLF_UNSET" }',
         r"MCP server 'docs': env_http_headers\.X-Key: environment variable RLF_UNSET is not set"),
        ('url = "http://127.0.0.1:1/mcp"\nenv_http_headers = { "X-Key" = 7 }', r"mcp_servers\.docs\.env_http_headers\.X-Key: "),
        ('url = "http://127.0.0.1:1/mcp"\nhttp_headers = { "X" = "a" }\nheaders = { "X" = "b" }',
         r"give either 'headers' or 'http_headers'"),
        ('command = "python"\nenabled = "maybe"', r"mcp_servers\.docs\.enabled: "),
        ('command = "python"\nargs = [', r"not valid TOML: "),
    ],
)  # fmt: skip
def test_a_bad_value_in_a_codex_config_fails_at_load_naming_the_field(
    entry: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RLF_UNSET", raising=False)
    config = tmp_path / "config.toml"
    config.write_text(f'model = "o3"\n\n[mcp_servers.docs]\n{entry}\n')
    with pytest.raises(EnvConfigError, match=message) as failure:
        load_env_config(env_for(config, tmp_path))
    assert "sk-live" not in str(failure.value)  # a token written where its variable's name belongs


GOOSE_YAML = """\
GOOSE_PROVIDER: anthropic
GOOSE_MODEL: claude-sonnet-4
GOOSE_MODE: smart_approve
extensions:
  developer:
    bundled: true
    display_name: Developer
    enabled: true
    name: developer
    timeout: 300
    type: builtin
  computercontroller:
    bundled: true
    display_name: Computer Controller
    enabled: false
    name: computercontroller
    timeout: 300
    type: builtin
  todo:
    available_tools: []
    bundled: true
    description: Enable a todo list for goose so it can keep track of what it is doing
    display_name: Todo
    enabled: true
    name: todo
    type: platform
  slow:
    args:
    - {server}
    available_tools: []
    bundled: null
    cmd: python
    description: the test suite's slow server
    enabled: true
    env_keys:
    - RLF_GOOSE_KEY
    envs:
      RLF_GOOSE_MODE: quick
    name: slow
    timeout: 42
    type: stdio
  picky:
    args:
    - {server}
    cmd: python
    enabled: true
    name: picky
    available_tools: [echo]
    type: stdio
  github:
    args: [-y, '@modelcontextprotocol/server-github']
    cmd: npx-that-is-not-here
    enabled: false
    env_keys: [GITHUB_PERSONAL_ACCESS_TOKEN]
    envs: {{}}
    name: github
    timeout: 300
    type: stdio
  remote:
    description: ''
    enabled: true
    env_keys: [RLF_GOOSE_TOKEN]
    envs: {{}}
    headers:
      Authorization: Bearer $RLF_GOOSE_TOKEN
    name: remote
    timeout: 60
    type: streamable_http
    uri: {url}
  keyed:
    enabled: true
    envs:
      RLF_GOOSE_LITERAL: {token}
    headers:
      Authorization: Bearer ${{RLF_GOOSE_LITERAL}}
    name: keyed
    type: streamable_http
    uri: {url}
"""


@pytest.mark.timeout(90)
def test_a_goose_config_yaml_loads_its_extensions_and_skips_goose_s_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, auth_url: str
) -> None:
    """Goose's ``extensions:``: ``cmd``/``args``/``envs``, ``env_keys`` passed through from our environment,
    ``timeout`` in seconds, ``uri`` for a remote one (its ``envs`` fill its headers); its builtin and platform extensions run inside goose,
    so they are skipped with a warning naming them, and ``enabled: false`` skips as anywhere."""
    key = "goose-key-5e0c77a1b2"
    monkeypatch.setenv("RLF_GOOSE_KEY", key)
    monkeypatch.setenv("RLF_GOOSE_TOKEN", AUTH_TOKEN)
    config = tmp_path / ".config" / "goose" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(GOOSE_YAML.format(server=SLOW_SERVER, url=auth_url, token=AUTH_TOKEN))
    with caplog.at_level(logging.INFO):
        loaded = load_env_config(env_for(config, tmp_path))
        servers = loaded.mcp_servers().mcpServers
    assert list(servers) == ["slow", "picky", "remote", "keyed"]
    slow, remote = servers["slow"], servers["remote"]
    assert slow.env == {"RLF_GOOSE_MODE": "quick", "RLF_GOOSE_KEY": key} and slow.call_timeout_s == 42
    assert remote.kind == "streamable-http" and remote.call_timeout_s == 60
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("'developer'" in w and "'todo'" in w and "goose" in w for w in warnings), warnings
    assert not any("computercontroller" in w or "unknown" in w for w in warnings), warnings
    with ToolExecutor(mcp_providers(loaded.mcp_servers())) as executor:
        assert "picky_echo" in executor.tools and "picky_pid" not in executor.tools
        records = executor.execute(
            [
                ToolCall("getenv", {"name": "RLF_GOOSE_MODE"}),
                ToolCall("getenv", {"name": "RLF_GOOSE_KEY"}),
                ToolCall("remote_echo", {"text": "through"}),
                ToolCall("keyed_echo", {"text": "its envs"}),
            ]
        )
    assert [r.observation for r in records] == ["quick", "${RLF_GOOSE_KEY}", "through", "its envs"], records
    assert AUTH_TOKEN not in "\n".join(r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"type": "stdio", "cmd": "python", "args": "server.py"}, r"extensions\.docs\.args: Input should be a valid list"),
        ({"type": "stdio", "cmd": ["python"]}, r"extensions\.docs\.cmd: Input should be a valid string"),
        ({"type": "stdio", "cmd": "python", "envs": ["A=1"]}, r"extensions\.docs\.envs: "),
        ({"type": "stdio", "cmd": "python", "env_keys": "RLF_UNSET"}, r"extensions\.docs\.env_keys: "),
        ({"type": "stdio", "cmd": "python", "env_keys": ["RLF_UNSET"]},
         r"MCP server 'docs': env_keys/env_vars: environment variable RLF_UNSET is not set"),
        ({"type": "stdio", "cmd": "python", "timeout": "long"}, r"extensions\.docs\.timeout: "),
        ({"type": "stdio", "cmd": "python", "available_tools": "echo"}, r"'available_tools' must be a list"),
        ({"type": "streamable_http", "uri": 5}, r"extensions\.docs\.uri: Input should be a valid string"),
        ({"type": "websocket", "uri": "ws://h"}, r"extensions\.docs.*type/transport 'websocket'"),
        ({"type": "stdio", "cmd": "python", "enabled": "sometimes"}, r"extensions\.docs\.enabled: "),
    ],
)  # fmt: skip
def test_a_bad_value_in_a_goose_config_fails_at_load_naming_the_field(
    entry: dict, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RLF_UNSET", raising=False)
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump({"GOOSE_MODEL": "x", "extensions": {"docs": {"enabled": True, **entry}}})
    )
    with pytest.raises(EnvConfigError, match=message):
        load_env_config(env_for(config, tmp_path))


def test_gemini_s_extensions_settings_are_no_goose_extensions() -> None:
    """Gemini CLI's ``settings.json`` has an ``extensions`` block of its own (which to disable): not servers."""
    settings = {"extensions": {"disabled": ["a"]}, "mcpServers": {"s": dict(SLOW)}}
    assert list(McpConfig.model_validate(settings).mcpServers) == ["s"]
