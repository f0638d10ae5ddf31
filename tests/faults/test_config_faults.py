"""Environment files that must not start a run: each fails at load (or at start, for tool names) with a
message that names the file and the field, never a raw Python error and never a silently useless env."""

from __future__ import annotations

from pathlib import Path

import pytest

from swift_rlfactory.env.config import EnvConfigError, load_env_config
from swift_rlfactory.env.environment import Environment, validate_env_files

from .driver import ENV_DIR

TOOLS = ENV_DIR / "tools.py"
pytestmark = pytest.mark.timeout(60)


def write(tmp_path: Path, text: str, name: str = "env.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n", "~\n", "null\n", "{}\n"])
def test_an_empty_file_is_not_an_environment(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(EnvConfigError, match="the environment file is empty") as info:
        load_env_config(path)
    assert str(path) in str(info.value)


def test_an_environment_without_tools_or_reward_is_rejected(tmp_path):
    with pytest.raises(EnvConfigError, match="declares no tools and no reward"):
        load_env_config(write(tmp_path, "name: idle\nsystem_prompt: hi\nlimits: {max_turns: 2}\n"))
    load_env_config(write(tmp_path, "reward: [{name: em}]\n"))  # a reward alone is a (tool-less) env
    load_env_config(write(tmp_path, f"tools: {{python: [{TOOLS}]}}\n"))  # tools alone too


@pytest.mark.parametrize(
    "block, field",
    [
        ("limits: {call_timeout_s: .inf}", "limits.call_timeout_s"),
        ("limits: {call_timeout_s: .nan}", "limits.call_timeout_s"),
        ("limits: {call_timeout_s: .NaN}", "limits.call_timeout_s"),
        ("limits: {call_timeout_s: .Inf}", "limits.call_timeout_s"),
        ("cache: {tools: ['*'], ttl_s: .inf}", "cache.ttl_s"),
        ("reward: [{name: em, weight: .nan}]", "reward.0.weight"),
        ("reward: [{name: em, weight: -.inf}]", "reward.0.weight"),
        ("reward: [{name: em, weight: '1e999'}]", "reward.0.weight"),  # a string that parses to inf
    ],
)
def test_non_finite_numbers_are_rejected_naming_the_field(tmp_path, block, field):
    text = f"tools: {{python: [{TOOLS}]}}\n{block}\n"
    with pytest.raises(EnvConfigError) as info:
        load_env_config(write(tmp_path, text))
    assert f"{field}:" in str(info.value) and "finite" in str(info.value)


def test_a_folder_or_an_unreadable_file_gets_a_clear_message(tmp_path):
    with pytest.raises(EnvConfigError, match="is a folder, not a YAML file") as info:
        load_env_config(tmp_path)
    assert "did you mean" not in str(info.value)
    write(tmp_path, "reward: [{name: em}]\n")
    with pytest.raises(EnvConfigError, match=r"did you mean .*env\.yaml"):
        load_env_config(tmp_path)  # a folder holding an env.yaml: say which file was meant
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(EnvConfigError, match="not a text file"):
        load_env_config(binary)


@pytest.mark.parametrize(
    "block, field",
    [
        ("cache: {tools: [echo, ehco]}", "cache.tools: unknown tool 'ehco'"),
        (
            "limits: {per_tool_concurrency: {nap: 2, sleeep: 1}}",
            "limits.per_tool_concurrency: unknown tool 'sleeep'",
        ),
    ],
)
def test_limits_and_cache_naming_unknown_tools_fail_at_start(tmp_path, block, field):
    env = Environment.load(write(tmp_path, f"tools: {{python: [{TOOLS}]}}\n{block}\n"))
    with pytest.raises(EnvConfigError) as info:
        env.start()
    message = str(info.value)
    assert field in message and "known tools: boom, echo, nap, stubborn, stuck, words" in message
    assert str(tmp_path / "env.yaml") in message


def test_known_tool_names_and_the_wildcard_start(tmp_path):
    text = f"tools: {{python: [{TOOLS}]}}\ncache: {{tools: ['*', echo]}}\nlimits: {{per_tool_concurrency: {{nap: 2}}}}\n"
    with Environment.load(write(tmp_path, text)) as env:
        assert "echo" in env.executor.tools


def test_validate_env_files_reports_every_bad_file_once(tmp_path):
    good = write(tmp_path, f"tools: {{python: [{TOOLS}]}}\n", "good.yaml")
    empty = write(tmp_path, "", "empty.yaml")
    unknown = write(tmp_path, f"tools: {{python: [{TOOLS}]}}\ncache: {{tools: [nope]}}\n", "unknown.yaml")
    missing = tmp_path / "missing.yaml"
    paths = [good, empty, missing, empty, unknown, str(good)]
    loaded = validate_env_files(paths)
    assert len(loaded) == 2  # the unknown cache tool is only known after start
    assert "empty.yaml: the environment file is empty" in loaded[0]
    assert "not found" in loaded[1] and "missing.yaml" in loaded[1]
    started = validate_env_files(paths, start=True)
    assert started[:2] == loaded and len(started) == 3
    assert "cache.tools: unknown tool 'nope'" in started[2] and "unknown.yaml" in started[2]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"name: a\nname: b\ntools: {{python: [{TOOLS}]}}\n", r"key 'name' is given twice.*line 2"),
        (
            f"tools: {{python: [{TOOLS}]}}\nlimits: {{max_turns: 2, max_turns: 9}}\n",
            r"key 'max_turns' is given twice",
        ),
        (f"base_dir: /etc\ntools: {{python: [{TOOLS}]}}\n", r"base_dir: set by the loader"),
        (f"source: x.yaml\ntools: {{python: [{TOOLS}]}}\n", r"source: set by the loader"),
        ("tools: {mcp_config: .}\n", r"tools\.mcp_config: cannot read .*: Is a directory"),
        (
            f"tools: {{python: [{TOOLS}]}}\nlimits: {{max_turns: true}}\n",
            r"limits\.max_turns: .*expected a number, got true",
        ),
        (f"tools: {{python: [{TOOLS}]}}\ncache: {{tools: ['*'], ttl_s: no}}\n", r"cache\.ttl_s: .*got false"),
    ],
)
def test_config_that_would_load_wrong_fails_naming_the_key(tmp_path, text, message):
    with pytest.raises(EnvConfigError, match=rf"(?s){message}"):
        load_env_config(write(tmp_path, text))


def test_two_python_tools_of_one_name_fail_and_one_tool_listed_twice_counts_once(tmp_path):
    (tmp_path / "twins.py").write_text(
        "from swift_rlfactory.tools import tool\n\n"
        "@tool(name='f')\ndef one() -> str:\n    '''One.'''\n    return '1'\n\n"
        "@tool(name='f')\ndef two() -> str:\n    '''Two.'''\n    return '2'\n"
    )
    with pytest.raises(
        EnvConfigError, match=r"tools\.python\[0\] \('twins\.py'\): a second Python tool named 'f'"
    ):
        Environment(load_env_config(write(tmp_path, "tools: {python: [twins.py]}\n")))
    twice = Environment(load_env_config(write(tmp_path, f"tools: {{python: [{TOOLS}, '{TOOLS}:echo']}}\n")))
    with twice:
        assert "python_echo" not in twice.executor.tools and "echo" in twice.executor.tools


SECRET = "sk-live-SECRET1234567890"


@pytest.mark.parametrize(
    "name, text, where",
    [
        (  # a missing closing quote: PyYAML's own message quotes the line, and with it the key
            "env.yaml",
            f'name: x\nreward:\n  - name: judge\n    args:\n      api_key: "{SECRET}\n      model: m\n',
            "line 5, column 16",
        ),
        ("env.yaml", f"reward: [{{name: em}}]\napi_key: {SECRET}: more\n", "line 2, column 34"),
        (
            "mcp.yaml",
            f"mcpServers:\n  s: {{command: python, env: {{KEY: '{SECRET}}}}}\n",
            "line 2, column 35",
        ),
    ],
)
def test_a_yaml_syntax_error_names_the_line_and_never_quotes_it(tmp_path, name, text, where):
    """The message says the file, line and column and what is wrong; the line itself, which may hold a
    key not yet registered as a secret (the file could not be read to find it), is never shown."""
    path = write(tmp_path, text, name)
    if name != "env.yaml":  # an MCP config file, reached through the environment's tools.mcp_config
        path = write(tmp_path, f"tools: {{mcp_config: {name}}}\n")
    with pytest.raises(EnvConfigError, match="not valid YAML") as info:
        load_env_config(path)
    message = str(info.value)
    assert str(tmp_path / name) in message and where in message
    assert SECRET not in message and "sk-live" not in message
