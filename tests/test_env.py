"""Environment files: validation naming the bad field, relative paths, and the CLI on real environments."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from swift_rlfactory.env.config import EnvConfigError, load_env_config
from swift_rlfactory.env.environment import Environment
from swift_rlfactory.tools import ToolCall

EXAMPLES = Path(__file__).parents[1] / "examples"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "env.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, field",
    [
        ("limits: {max_turns: 0}", "limits.max_turns: Input should be greater than 0"),
        ("limits: {per_tool_concurrency: {search: -1}}", "limits.per_tool_concurrency"),
        ("tools: {pyhton: [x.py]}", "tools.pyhton: Extra inputs are not permitted"),
        ("reward: [{weight: 1}]", "reward.0.name: Field required"),
        (
            "tools: {mcp: {mcpServers: {s: {command: python, url: 'http://x'}}}}",
            "tools.mcp.mcpServers.s: Value error, give exactly one of 'command'",
        ),
        ("cache: {max_entries: many}", "cache.max_entries: Input should be a valid integer"),
        ("- just a list", "the top level must be a mapping"),
        ("limits: [", "not valid YAML"),
    ],
)
def test_bad_fields_are_named(tmp_path, text, field):
    with pytest.raises(EnvConfigError) as info:
        load_env_config(write(tmp_path, text))
    assert field in str(info.value)
    assert str(tmp_path) in str(info.value)


def test_missing_file_and_bad_references(tmp_path):
    with pytest.raises(EnvConfigError, match="not found"):
        load_env_config(tmp_path / "nope.yaml")
    with pytest.raises(EnvConfigError, match=r"tools\.python\[0\] \('missing\.py'\)"):
        Environment.load(write(tmp_path, "tools: {python: [missing.py]}"))
    with pytest.raises(EnvConfigError, match=r"reward\[0\]\.name: unknown reward 'exact'"):
        Environment.load(write(tmp_path, "reward: [{name: exact}]"))
    with pytest.raises(EnvConfigError, match="tools.mcp_config: file not found"):
        load_env_config(write(tmp_path, "tools: {mcp_config: servers.json}"))


def test_relative_paths_resolve_against_the_yaml_folder(tmp_path):
    sub = tmp_path / "env"
    sub.mkdir()
    (sub / "servers.json").write_text(
        json.dumps({"mcpServers": {"kv": {"command": "python", "args": ["kv.py"]}}})
    )
    config = load_env_config(
        write(sub, "tools: {mcp_config: servers.json}\ncache: {tools: ['*'], sqlite_path: c/cache.sqlite}")
    )
    assert config.mcp_servers().mcpServers["kv"].cwd == str(sub.resolve())
    assert config.resolve(config.cache.sqlite_path) == (sub / "c" / "cache.sqlite").resolve()


def test_calculator_environment_runs_its_tool():
    with Environment.load(EXAMPLES / "calculator" / "env.yaml") as env:
        assert [s["function"]["name"] for s in env.tool_schemas()] == ["calculate"]
        assert env.max_turns == 3 and "calculator" in env.system_prompt
        assert env.reward.names == ["em", "format", "tool_use"]


@pytest.mark.parametrize(
    "module", ["swift_rlfactory.envs.calculator.tools", "swift_rlfactory.bundled.calculator.tools"]
)
def test_an_env_file_naming_the_calculator_where_it_used_to_live_loads(tmp_path, module):
    with Environment.load(write(tmp_path, f"tools: {{python: ['{module}:calculate']}}")) as env:
        assert [s["function"]["name"] for s in env.tool_schemas()] == ["calculate"]


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "swift_rlfactory.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_tools_list_and_call():
    env = str(EXAMPLES / "calculator" / "env.yaml")
    listing = run_cli("tools", "list", env)
    assert listing.returncode == 0, listing.stderr
    assert "calculate" in listing.stdout and '"expression"' in listing.stdout

    call = run_cli("tools", "call", env, "calculate", '{"expression": "6 * 7"}', "--repeat", "2")
    assert call.returncode == 0, call.stderr
    lines = call.stdout.splitlines()
    assert lines[0] == "42" and "cache miss" in lines[1] and "cache hit" in lines[3]


def test_cli_failures_exit_non_zero_with_a_clear_message(tmp_path):
    env = str(EXAMPLES / "calculator" / "env.yaml")
    failed = run_cli("tools", "call", env, "calculate", '{"expression": "1/0"}')
    # the observation, exactly as the model reads it, printed once
    assert failed.returncode == 1 and failed.stdout.count("division by zero") == 1
    unknown = run_cli("tools", "call", env, "nope", "{}")
    assert unknown.returncode == 2 and "unknown tool 'nope'" in unknown.stderr
    bad_json = run_cli("tools", "call", env, "calculate", "{expression")
    assert bad_json.returncode == 2 and "not valid JSON" in bad_json.stderr
    bad_env = run_cli("tools", "list", str(write(tmp_path, "limits: {max_turns: -1}")))
    assert bad_env.returncode == 2 and "limits.max_turns" in bad_env.stderr


def test_cli_plugin_path_points_at_the_plugin():
    out = run_cli("plugin-path")
    assert out.returncode == 0 and out.stdout.strip().endswith("swift_rlfactory/plugin.py")


def test_mcp_config_expands_environment_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("RLF_TEST_TOKEN", "s3cret")
    monkeypatch.setenv("RLF_TEST_PORT", "8123")
    config = load_env_config(
        write(
            tmp_path,
            "tools: {mcp: {mcpServers: {"
            "remote: {url: 'http://127.0.0.1:${RLF_TEST_PORT}/mcp', headers: {Authorization: 'Bearer ${RLF_TEST_TOKEN}'}},"
            "local: {command: python, args: [server.py, --port, '${RLF_TEST_PORT}']}}}}",
        )
    )
    servers = config.mcp_servers().mcpServers
    assert servers["remote"].url == "http://127.0.0.1:8123/mcp"
    assert servers["remote"].headers == {"Authorization": "Bearer s3cret"}
    assert servers["local"].args == ["server.py", "--port", "8123"]


@pytest.mark.parametrize(
    "value, message",
    [
        ("0", "limits.max_description_chars: Input should be greater than 0"),
        ("-5", "limits.max_description_chars: Input should be greater than 0"),
        ("true", "limits.max_description_chars: Value error, expected a number, got true"),
        ("lots", "limits.max_description_chars: Input should be a valid integer"),
        ("2.5", "limits.max_description_chars: Input should be a valid integer"),
    ],
)
def test_a_bad_description_cap_is_named_at_load(tmp_path, value, message):
    with pytest.raises(EnvConfigError) as info:
        load_env_config(
            write(tmp_path, f"reward: [{{name: em}}]\nlimits: {{max_description_chars: {value}}}")
        )
    assert message in str(info.value)


LONG_TOOL = '''
from swift_rlfactory.tools import tool


@tool
def lookup(term: str) -> str:
    """{summary}

    Args:
        term: {term}
    """
    return term
'''


@pytest.mark.parametrize(
    "limits, cut",
    [
        ("", 4096),
        ("limits: {max_description_chars: 300}", 300),
        ("limits: {max_description_chars: null}", None),
    ],
)
def test_the_tool_list_in_the_system_prompt_holds_descriptions_cut_to_the_cap(tmp_path, caplog, limits, cut):
    """A docstring (or an MCP server's description) of 10,000 characters reaches the system prompt cut to
    ``limits.max_description_chars`` (default 4096), with a note, and a warning names the tool; ``null``
    shows it whole."""
    from swift_rlfactory.adapters.swift_template import template_by_name, with_system_prompt

    summary, term = "S" * 10_000, "T" * 5_000
    (tmp_path / "tools.py").write_text(LONG_TOOL.format(summary=summary, term=term))
    (tmp_path / "env.yaml").write_text(f"tools: {{python: [tools.py]}}\n{limits}\n")
    with (
        caplog.at_level("WARNING", logger="swift_rlfactory.tools.toolset"),
        Environment.load(tmp_path / "env.yaml") as env,
    ):
        [schema] = env.tool_schemas()
        [record] = env.executor.execute([ToolCall("lookup", {"term": "x"})])
        messages = [{"role": "user", "content": "Look up x."}]
        [system, _] = with_system_prompt(messages, template_by_name("qwen3"), "Be brief.", env.tool_schemas())
    function = schema["function"]
    described = function["parameters"]["properties"]["term"]["description"]
    if cut is None:
        assert (function["description"], described) == (summary, term)
        assert not caplog.records
    else:
        assert (
            function["description"]
            == f"{summary[:cut]} [description cut: 10000 characters, the first {cut} shown]"
        )
        assert described == f"{term[:cut]} [description cut: 5000 characters, the first {cut} shown]"
        assert [r.getMessage().split(":")[0] for r in caplog.records] == ["tool 'lookup' of 'python'"]
        assert (
            "[description cut: 10000 characters" in system["content"]
        )  # what ms-swift renders for the model
        assert len(system["content"]) < 2 * cut + 1_000
    assert record.observation == "x"  # the tool still runs as itself
