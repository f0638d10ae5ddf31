"""What real clients' config files mean beyond how a server starts: tool filters, Gemini CLI's server
lists and the unit of a bare ``timeout``. Tools are checked on real servers (``tests/servers/``) started
as subprocesses, the way training starts them.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from swift_rlfactory.env.config import load_env_config
from swift_rlfactory.tools import ToolCall, ToolExecutor
from swift_rlfactory.tools.mcp import McpProvider, mcp_providers
from swift_rlfactory.tools.mcp_config import McpConfig, McpServerConfig
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
            "roo": {**SLOW, "disabledTools": ["crash", "block", "big", "getenv", "count", "shape"]},
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
    with caplog.at_level(logging.INFO, logger="swift_rlfactory.tools.mcp_config"):
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
