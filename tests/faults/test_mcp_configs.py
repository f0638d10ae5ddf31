"""Real MCP client config files drop in: each shape is written to a file and loaded the way a user would,
through an environment YAML's ``tools.mcp_config`` and :func:`load_env_config`.

The shapes follow each client's documentation: Claude Desktop, Claude Code (``.mcp.json``), Cursor, VS Code
(``.vscode/mcp.json``, JSON with comments), Windsurf, Cline, Roo/Kilo, Continue (YAML list), Zed, Gemini CLI,
opencode, Codex CLI (``config.toml``), Goose (``config.yaml``). One test also starts servers from such a file to show the result really runs.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swift_rlfactory.env.config import EnvConfigError, load_env_config
from swift_rlfactory.tools import Limits, ToolCall, ToolExecutor
from swift_rlfactory.tools.base import ToolSpec
from swift_rlfactory.tools.mcp import McpProvider, McpTool, mcp_providers
from swift_rlfactory.tools.mcp.config import McpConfig, McpServerConfig
from tests.test_mcp import SLOW_SERVER, serve

URL = "http://127.0.0.1:8931/mcp"

SHAPES: dict[str, tuple[str, str]] = {
    "claude_desktop": (
        "claude_desktop_config.json",
        json.dumps(
            {
                "globalShortcut": "Ctrl+Space",
                "mcpServers": {
                    "fs": {"command": "npx", "args": ["-y", "server-fs", "/tmp"], "env": {"K": "v"}}
                },
            }
        ),
    ),
    "claude_code": (
        ".mcp.json",
        json.dumps(
            {
                "mcpServers": {
                    "api": {"type": "http", "url": URL, "headers": {"X-Key": "k"}, "timeout": 60000},
                    "old": {"type": "sse", "url": "http://127.0.0.1:8932/sse"},
                    "local": {"type": "stdio", "command": "python", "args": ["s.py"], "env": {}},
                }
            }
        ),
    ),
    "cursor": (
        "mcp.json",
        json.dumps(
            {
                "mcpServers": {
                    "remote": {"url": URL, "headers": {}},
                    "local": {"command": "python", "args": ["s.py"]},
                }
            }
        ),
    ),
    "vscode": (
        "mcp.json",
        """{
          // VS Code: top-level "servers", "inputs" for prompted secrets, comments and trailing commas
          "inputs": [{"type": "promptString", "id": "key", "description": "API key", "password": true}],
          "servers": {
            "local": {"type": "stdio", "command": "python", "args": ["s.py"], "envFile": "${workspaceFolder}/.env",},
            "remote": {"type": "http", "url": "http://127.0.0.1:8931/mcp", "headers": {"k": "${env:HOME}"}},
          },
        }""",
    ),
    "windsurf": (
        "mcp_config.json",
        json.dumps(
            {
                "mcpServers": {
                    "remote": {"serverUrl": URL, "headers": {"Authorization": "Bearer t"}},
                    "off": {"command": "does-not-exist", "disabled": True},
                    "local": {"command": "python", "args": ["s.py"], "disabled": False, "env": {}},
                }
            }
        ),
    ),
    "cline": (
        "cline_mcp_settings.json",
        json.dumps(
            {
                "mcpServers": {
                    "local": {
                        "command": "python",
                        "args": ["s.py"],
                        "env": {},
                        "disabled": False,
                        "autoApprove": ["echo"],
                        "timeout": 60,
                        "type": "stdio",
                    },
                    "remote": {"type": "streamableHttp", "url": URL, "timeout": 30, "disabled": False},
                    "old": {"transportType": "sse", "url": "http://127.0.0.1:8932/sse", "autoApprove": []},
                }
            }
        ),  # fmt: skip
    ),
    "roo_kilo": (
        "mcp_settings.json",
        json.dumps(
            {
                "mcpServers": {
                    "remote": {
                        "type": "streamable-http",
                        "url": URL,
                        "alwaysAllow": ["echo"],
                        "disabled": False,
                    },
                    "local": {
                        "command": "python",
                        "args": ["s.py"],
                        "alwaysAllow": [],
                        "disabledTools": ["x"],
                    },
                }
            }
        ),
    ),
    "continue": (
        "continue.yaml",
        "name: assistant\nversion: 0.0.1\nschema: v1\nmcpServers:\n"
        "  - name: local\n    command: python\n    args: [s.py]\n    env: {PORT: 8000}\n"
        "  - name: remote\n    type: streamable-http\n    url: http://127.0.0.1:8931/mcp\n",
    ),
    "zed": (
        "settings.json",
        json.dumps(
            {
                "theme": "One Dark",
                "context_servers": {
                    "local": {
                        "source": "custom",
                        "enabled": True,
                        "command": "python",
                        "args": ["s.py"],
                        "env": {},
                    },
                    "remote": {"url": URL, "headers": {"Authorization": "Bearer t"}},
                    "older": {"command": {"path": "python", "args": ["s.py"], "env": {}}, "settings": {}},
                },
            }
        ),
    ),
    "gemini_cli": (
        "settings.json",
        json.dumps(
            {
                "mcpServers": {
                    "remote": {"httpUrl": URL, "timeout": 600000, "trust": False, "includeTools": ["echo"]},
                    "local": {"command": "python", "args": ["s.py"], "cwd": "./srv", "timeout": 30000},
                }
            }
        ),
    ),
    "opencode": (
        "opencode.json",
        json.dumps(
            {
                "$schema": "https://opencode.ai/config.json",
                "mcp": {
                    "local": {
                        "type": "local",
                        "command": ["python", "s.py"],
                        "enabled": True,
                        "environment": {"A": "b"},
                    },
                    "remote": {"type": "remote", "url": URL, "enabled": True},
                    "off": {"type": "remote", "url": URL, "enabled": False},
                },
            }
        ),
    ),
    "codex": (
        "config.toml",
        f'''model = "gpt-5-codex"
approval_policy = "never"

[mcp_servers.local]
command = "python"
args = ["s.py"]
tool_timeout_sec = 30

[mcp_servers.local.env]
A = "b"

[mcp_servers.remote]
url = "{URL}"
http_headers = {{ "X-Team" = "core" }}

[mcp_servers.off]
command = "python"
args = ["s.py"]
enabled = false
''',
    ),
    "goose": (
        "config.yaml",
        f"""GOOSE_PROVIDER: openai
GOOSE_MODEL: gpt-4o
extensions:
  local:
    args: [s.py]
    bundled: null
    cmd: python
    description: null
    enabled: true
    env_keys: []
    envs: {{A: b}}
    name: local
    timeout: 300
    type: stdio
  remote:
    enabled: true
    headers: {{}}
    name: remote
    timeout: 60
    type: streamable_http
    uri: {URL}
""",
    ),
}

# What each shape must come out as: server -> (kind, per-call timeout in seconds).
EXPECTED: dict[str, dict[str, tuple[str, float | None]]] = {
    "claude_desktop": {"fs": ("stdio", None)},
    "claude_code": {"api": ("streamable-http", 60.0), "old": ("sse", None), "local": ("stdio", None)},
    "cursor": {"remote": ("auto", None), "local": ("stdio", None)},
    "vscode": {"local": ("stdio", None), "remote": ("streamable-http", None)},
    "windsurf": {"remote": ("auto", None), "local": ("stdio", None)},
    "cline": {"local": ("stdio", 60.0), "remote": ("streamable-http", 30.0), "old": ("sse", None)},
    "roo_kilo": {"remote": ("streamable-http", None), "local": ("stdio", None)},
    "continue": {"local": ("stdio", None), "remote": ("streamable-http", None)},
    "zed": {"local": ("stdio", None), "remote": ("auto", None), "older": ("stdio", None)},
    "gemini_cli": {"remote": ("streamable-http", 600.0), "local": ("stdio", 30.0)},
    "opencode": {"local": ("stdio", None), "remote": ("auto", None)},
    "codex": {"local": ("stdio", 30.0), "remote": ("streamable-http", None)},
    "goose": {"local": ("stdio", 300.0), "remote": ("streamable-http", 60.0)},
}


def env_with(tmp_path: Path, file_name: str, text: str, extra: str = "") -> Path:
    (tmp_path / file_name).write_text(text)
    (tmp_path / ".env").write_text("# VS Code envFile\nexport FROM_FILE='yes'\n")
    (tmp_path / "srv").mkdir(exist_ok=True)  # a shape's cwd: a cwd that is no folder fails at load
    env = tmp_path / "env.yaml"
    env.write_text(f"tools:\n  mcp_config: {file_name}\n{extra}")
    return env


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_real_config_shapes_load(shape: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    file_name, text = SHAPES[shape]
    with caplog.at_level(logging.DEBUG, logger="swift_rlfactory.tools.mcp.config"):
        servers = load_env_config(env_with(tmp_path, file_name, text)).mcp_servers().mcpServers
    got = {name: (server.kind, server.call_timeout_s) for name, server in servers.items()}
    assert got == EXPECTED[shape]
    for server in servers.values():
        if server.kind == "stdio":
            assert server.command in ("python", "npx") and server.args and server.cwd
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # UI keys are no cause for alarm


def test_details_of_the_shapes(tmp_path: Path) -> None:
    def load(shape: str) -> dict[str, McpServerConfig]:
        file_name, text = SHAPES[shape]
        folder = tmp_path / shape
        folder.mkdir(exist_ok=True)
        return load_env_config(env_with(folder, file_name, text)).mcp_servers().mcpServers

    vscode = load("vscode")
    assert vscode["local"].env == {"FROM_FILE": "yes"}  # envFile under ${workspaceFolder}
    assert vscode["remote"].headers == {"k": str(Path.home())}  # ${env:HOME}
    assert load("continue")["local"].env == {"PORT": "8000"}  # a YAML number where a string is meant
    assert load("opencode")["local"].env == {"A": "b"} and load("opencode")["local"].args == ["s.py"]
    assert load("zed")["older"].args == ["s.py"]
    assert load("gemini_cli")["local"].cwd == str((tmp_path / "gemini_cli" / "srv").resolve())
    assert load("windsurf")["remote"].url == URL and "off" not in load("windsurf")
    assert load("codex")["local"].env == {"A": "b"} and load("codex")["remote"].headers == {"X-Team": "core"}
    assert load("goose")["local"].env == {"A": "b"} and load("goose")["remote"].url == URL


def test_server_timeout_becomes_the_tools_timeout() -> None:
    def timeout(**entry: object) -> float | None:
        config = McpServerConfig.model_validate({"command": "python", **entry})
        return McpTool(McpProvider("s", config), ToolSpec("t")).timeout_s

    assert timeout() is None
    assert timeout(timeout=45) == 45  # Cline: seconds
    assert timeout(timeout=120000) == 120  # Claude Code, Gemini CLI: milliseconds
    assert timeout(timeout_s=2.5) == 2.5 and timeout(timeout_ms=1500) == 1.5


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"command": "python", "sessions": 0}, "sessions"),
        ({"url": URL, "type": "websocket"}, "type/transport 'websocket'"),
        ({"command": "python", "args": "server.py"}, "args"),
        ({"command": "python", "timeout": -5}, "timeout"),
        ({"command": "python", "timeout": float("inf")}, "timeout"),
        ({"command": "python", "startup_timeout_s": float("nan")}, "startup_timeout_s"),
        ({"url": URL, "serverUrl": URL}, "either 'url' or 'serverUrl'"),
        ({"command": "python", "type": "sse"}, "needs a 'url'"),
        ({"command": "python", "max_result_mb": 0}, "max_result_mb"),
        ({"command": "", "args": ["server.py"]}, "'command' is empty"),
        ({"url": "  "}, "'url' is empty"),
    ],
)
def test_wrong_values_fail_at_load_naming_the_field(entry: dict, field: str, tmp_path: Path) -> None:
    with pytest.raises(EnvConfigError, match=rf"(?s)mcp_config.*s1.*{field}|{field}"):
        load_env_config(env_with(tmp_path, "servers.json", json.dumps({"mcpServers": {"s1": entry}})))


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ({"mcpServer": {"s1": {"command": "python"}}}, "mcpServer"),  # a misspelt wrapper
        ({"s1": {"command": "python", "args": ["server.py"]}}, "s1"),  # no wrapper at all
        ({"mcpservers": {"s1": {"url": URL}}}, "mcpservers"),
    ],
)
def test_servers_outside_the_server_keys_fail_at_load_naming_the_key(
    text: dict, key: str, tmp_path: Path
) -> None:
    """A run must not start without its tools because the servers sat under a key no client reads."""
    with pytest.raises(EnvConfigError, match=rf"top-level key '{key}' holds MCP servers.*mcpServers"):
        load_env_config(env_with(tmp_path, "servers.json", json.dumps(text)))
    inline = tmp_path / "inline.yaml"  # the same inside an environment file's tools.mcp
    inline.write_text(f"tools:\n  mcp: {json.dumps(text)}\nreward: [{{name: em}}]\n")
    with pytest.raises(EnvConfigError, match=rf"tools.mcp: .*top-level key '{key}'"):
        load_env_config(inline)
    # other top-level keys of a client's file (Claude Desktop's settings, VS Code's inputs) stay ignored
    other = {"globalShortcut": "Ctrl+Space", "inputs": [{"id": "token"}], "preferences": {"theme": "dark"}}
    config = McpConfig.model_validate({**other, "mcpServers": {"s1": {"command": "python"}}})
    assert list(config.mcpServers) == ["s1"]


def test_missing_env_file_is_named(tmp_path: Path) -> None:
    text = json.dumps({"servers": {"s1": {"command": "python", "envFile": "missing.env"}}})
    with pytest.raises(EnvConfigError, match="MCP server 's1': envFile .*missing.env"):
        load_env_config(env_with(tmp_path, "mcp.json", text)).mcp_servers()


def test_unknown_server_key_is_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = McpConfig.model_validate({"mcpServers": {"s": {"command": "python", "futureKey": 1}}})
    assert config.mcpServers["s"].command == "python"
    assert "futureKey" in caplog.text


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    yield from serve("streamable-http", "/mcp")


@pytest.mark.timeout(90)
def test_mixed_client_shapes_start_and_answer(http_url: str, tmp_path: Path) -> None:
    """A VS Code file (stdio + http) plus inline Windsurf and Cline entries, all live at once."""
    vscode = {
        "inputs": [],
        "servers": {
            "local": {"type": "stdio", "command": "python", "args": [str(SLOW_SERVER)]},
            "vs": {"type": "http", "url": http_url},
            "broken": {"type": "stdio", "command": "does-not-exist", "disabled": True},
        },
    }
    inline = (
        "  mcp:\n    mcpServers:\n"
        f"      wind: {{serverUrl: '{http_url}'}}\n"
        f"      cline: {{type: streamableHttp, url: '{http_url}', timeout: 30, autoApprove: [echo]}}\n"
    )
    config = load_env_config(env_with(tmp_path, "mcp.json", "// VS Code\n" + json.dumps(vscode), inline))
    providers = mcp_providers(config.mcp_servers())
    assert sorted(p.name for p in providers) == ["cline", "local", "vs", "wind"]
    with ToolExecutor(providers, Limits(call_timeout_s=20)) as executor:
        echoes = sorted(name for name in executor.tools if name.endswith("echo"))
        assert echoes == ["cline_echo", "echo", "local_echo", "vs_echo"]  # the first server keeps plain names
        records = executor.execute([ToolCall(name, {"text": name}) for name in echoes])
        assert [r.observation for r in records] == echoes
        assert executor.tools["cline_echo"].timeout_s == 30


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("context_servers:\n  fs:\n    command: {path: npx, args: [srv]}\n    env:\n", "fs.env"),
        ("context_servers:\n  fs:\n    command: {path: npx, args:}\n", "'command.args' must be a list"),
        ("context_servers:\n  fs:\n    command: {path: npx, env: [A=b]}\n", "'command.env' must be a mapping"),
        ("context_servers:\n  fs:\n    command: {path: npx, args: server.py}\n", "'command.args' must be a list"),
        ("context_servers:\n  fs:\n    command: {path: [npx]}\n", "fs.command"),
        ("mcp:\n  fs:\n    command: [npx, -y, srv]\n    args:\n", "fs.args"),
        ("mcp:\n  fs:\n    command: [npx, -y, srv]\n    args: more.py\n", "fs.args"),
        ("mcp:\n  fs:\n    command: [npx]\n    environment: [A=b]\n", "fs.env"),
        ("mcp:\n  fs: {command: [npx], enabled: maybe}\n", "fs.enabled"),
        ("mcp:\n  fs: {command: [npx], enabled:}\n", "fs.enabled"),
        ("mcp:\n  fs: {command: [npx], enabled: false, disabled: false}\n", "'enabled' and 'disabled' disagree"),
        ("mcpServers:\n  fs: {command: npx, disabled: sometimes}\n", "fs.disabled"),
    ],
)  # fmt: skip
def test_nested_and_list_commands_and_switches_of_the_wrong_type_fail_naming_the_field(
    text: str, field: str, tmp_path: Path
) -> None:
    with pytest.raises(EnvConfigError, match=rf"mcp_config .*\n.*{field}"):
        load_env_config(env_with(tmp_path, "settings.yaml", text))


def test_nested_and_list_commands_keep_arguments_whole_and_switches_read_as_written(tmp_path: Path) -> None:
    text = json.dumps(
        {
            "context_servers": {
                "zed": {"command": {"path": "python", "args": ["server.py", "-v"], "env": {"A": "1"}},
                        "args": ["--more"], "env": {"B": "2"}},
                "off_zed": {"command": {"path": "python"}, "enabled": "false"},
                "on_zed": {"command": {"path": "python", "args": ["s.py"]}, "enabled": "true"},
            },
            "mcp": {
                "oc": {"command": ["npx", "-y", "srv"], "args": ["--x"], "enabled": "yes"},
                "off_oc": {"type": "remote", "url": URL, "enabled": 0},
                "kept": {"command": ["npx"], "disabled": "false"},
                "dropped": {"command": ["npx"], "disabled": "true"},
            },
        }
    )  # fmt: skip
    servers = load_env_config(env_with(tmp_path, "settings.json", text)).mcp_servers().mcpServers
    assert sorted(servers) == ["kept", "oc", "on_zed", "zed"]
    assert servers["zed"].args == ["server.py", "-v", "--more"] and servers["zed"].env == {"A": "1", "B": "2"}
    assert servers["on_zed"].args == ["s.py"]
    assert servers["oc"].command == "npx" and servers["oc"].args == ["-y", "srv", "--x"]


# Every key a server entry may hold in some client's dialect (ours, aliases, UI-only, nested ``command``).
_SERVER_KEYS = sorted(
    {*McpServerConfig.model_fields, "envFile", "type", "transport", "transportType", "serverUrl", "httpUrl",
     "enabled", "environment", "path", "autoApprove", "name", "settings", "source", "futureKey"}
)  # fmt: skip
_TEXT = st.one_of(
    st.sampled_from(
        ["python", "npx", URL, "stdio", "sse", "http", "remote", "local", "false", "yes", "", " ",
         "${RLF_FUZZ_UNSET}", "${HOME}", "${RLF_FUZZ_UNSET:-d}", "${input:tok}", "{env:HOME}", "$HOME",
         "${workspaceFolder}/x", "s.py", "missing.env"]
    ),
    st.text(max_size=6),
)  # fmt: skip
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 70000) | st.floats(allow_nan=True) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT | st.sampled_from(_SERVER_KEYS), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
# A valid entry of each dialect to start from, so that one wrong field meets otherwise good entries.
_BASES = [
    {"command": "python", "args": ["s.py"], "env": {"K": "v"}},
    {"type": "http", "url": URL, "headers": {"X-Key": "k"}, "timeout": 60000},
    {"serverUrl": URL}, {"httpUrl": URL}, {"transportType": "sse", "url": URL},
    {"type": "local", "command": ["python", "s.py"], "environment": {"A": "b"}, "enabled": True},
    {"command": {"path": "python", "args": ["s.py"], "env": {}}, "settings": {}},
    {"type": "stdio", "command": "python", "envFile": "${workspaceFolder}/.env"},
]  # fmt: skip


@st.composite
def _entries(draw: st.DrawFn) -> Any:
    entry = dict(draw(st.sampled_from(_BASES)))
    for key in draw(st.lists(st.sampled_from(_SERVER_KEYS), max_size=3)):
        entry[key] = draw(_JSON)
    if isinstance(entry.get("command"), dict) and draw(st.booleans()):
        entry["command"] = {
            **entry["command"],
            draw(st.sampled_from(["path", "args", "env", "x"])): draw(_JSON),
        }
    return entry if draw(st.integers(0, 9)) else draw(_JSON)  # now and then no entry at all


_FILES = st.one_of(
    st.fixed_dictionaries({st_key: st.dictionaries(_TEXT, _entries(), max_size=2)})
    for st_key in ("mcpServers", "servers", "context_servers", "mcp")
) | st.fixed_dictionaries({"mcpServers": st.lists(_entries().map(lambda e: {"name": "c", **e} if isinstance(e, dict) else e), max_size=2)}) | _JSON  # fmt: skip


@pytest.mark.timeout(120)
def test_any_json_in_any_field_of_any_dialect_loads_or_fails_cleanly(
    monkeypatch: pytest.MonkeyPatch, isolated_secrets: None
) -> None:
    """Whatever a config file holds, loading it gives servers of the right types or an ``EnvConfigError``
    naming what is wrong, never a traceback: through the real loader, as a file and inline. The literal
    header values it draws ("python", "yes") are recorded as secrets, so they are forgotten after it."""
    monkeypatch.delenv("RLF_FUZZ_UNSET", raising=False)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / ".env").write_text("A=b\n")
        (root / "env.yaml").write_text("tools:\n  mcp_config: servers.json\nreward: [{name: em}]\n")

        @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(data=_FILES, inline=st.booleans())
        def check(data: Any, inline: bool) -> None:
            if inline:
                env = root / "inline.yaml"
                env.write_text(yaml.safe_dump({"tools": {"mcp": data}, "reward": [{"name": "em"}]}))
            else:
                env = root / "env.yaml"
                (root / "servers.json").write_text(json.dumps(data))
            try:
                servers = load_env_config(env).mcp_servers().mcpServers
            except EnvConfigError:
                return
            for server in servers.values():
                assert isinstance(server.command, str) != isinstance(server.url, str)
                assert all(isinstance(a, str) for a in server.args)
                assert all(isinstance(k, str) and isinstance(v, str) for k, v in server.env.items())
                assert all(isinstance(k, str) and isinstance(v, str) for k, v in server.headers.items())
                assert not server.disabled

        check()


def test_a_url_pasted_with_surrounding_whitespace_reaches_the_server(http_url: str, tmp_path: Path) -> None:
    """A url copied from a web page keeps a space or newline at its ends; a client takes the url itself.
    Kept, a leading space failed at start with httpx's "missing an 'http://' or 'https://' protocol" (the
    scheme check at load passed, as urlsplit strips it), and a trailing one asked for ``/mcp%20`` (HTTP 404)."""
    servers = {"lead": {"url": f" {http_url}"}, "trail": {"type": "http", "url": f"{http_url} \n"}}
    env = env_with(tmp_path, "mcp.json", json.dumps({"mcpServers": servers}))
    loaded = load_env_config(env).mcp_servers()
    assert {server.url for server in loaded.mcpServers.values()} == {http_url}
    with ToolExecutor(mcp_providers(loaded), Limits(call_timeout_s=20)) as executor:
        records = executor.execute([ToolCall("echo", {"text": "a"}), ToolCall("trail_echo", {"text": "b"})])
    assert [r.observation for r in records] == ["a", "b"]
