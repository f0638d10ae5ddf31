"""The names the model sees for MCP tools: valid function names, stable, telling clashing servers apart.

The tools come from real servers (``tests/servers/``) started as subprocesses from a config file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from swift_rlfactory.env.config import load_env_config
from swift_rlfactory.tools import ToolCall, ToolExecutor
from swift_rlfactory.tools.mcp import mcp_providers
from tests.test_mcp import ROOT, SLOW_SERVER

NAMES_SERVER = ROOT / "tests" / "servers" / "names_server.py"
SLOW = {"command": "python", "args": [str(SLOW_SERVER)]}


VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@pytest.mark.timeout(60)
def test_tool_names_the_model_sees_are_valid_function_names(tmp_path: Path) -> None:
    """Odd server tool names and renamed duplicates built from odd server keys become valid, distinct,
    stable names; calls still reach the server under its own name, and a renamed duplicate says whose it is."""
    settings = {
        "mcpServers": {
            "names": {"command": "python", "args": [str(NAMES_SERVER)]},
            "slow": SLOW,
            "my server.v2": SLOW,
        }
    }
    (tmp_path / "mcp.json").write_text(json.dumps(settings))
    (tmp_path / "env.yaml").write_text("tools:\n  mcp_config: mcp.json\n")
    config = load_env_config(tmp_path / "env.yaml")

    def started() -> dict[str, str]:
        with ToolExecutor(mcp_providers(config.mcp_servers())) as executor:
            schemas = {s["function"]["name"]: s["function"]["description"] for s in executor.schemas()}
            assert all(VALID.match(name) for name in schemas), list(schemas)
            odd = [n for n in schemas if n.startswith(("ns_", "t_x", "a_very"))]
            assert len(odd) == 4
            records = executor.execute([ToolCall(name, {"text": name}) for name in odd])
            assert [r.observation for r in records] == odd  # each reached the server under its real name
            echo = executor.execute([ToolCall("my_server_v2_echo", {"text": "v2"})])[0]
            assert echo.ok and echo.observation == "v2"
            return schemas

    schemas = started()
    assert {"ns_tool_with_odd_chars", "t_x", "plain", "echo", "my_server_v2_echo"} <= set(schemas)
    assert "(server 'my server.v2', tool 'echo')" in schemas["my_server_v2_echo"]
    assert "(server 'slow', tool 'echo')" in schemas["echo"]
    assert "server" not in schemas["plain"]  # a name offered once is left as the server wrote it
    assert started() == schemas  # the same tools get the same names every run
