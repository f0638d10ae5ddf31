"""Third-party MCP servers, the official reference servers from npm, run through our client as users
configure them.

Our own test servers (``tests/servers/``) are written to our reading of the protocol; these are written to
theirs. ``.ci/run`` installs pinned versions into ``tests/.mcp-npm`` (git-ignored); elsewhere the tests
skip, saying how to install them, unless ``CI`` is set, where a missing server fails them.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from swift_rlfactory.env.environment import Environment
from swift_rlfactory.tools import ToolCall

ROOT = Path(__file__).resolve().parents[1]
NPM = ROOT / "tests" / ".mcp-npm" / "node_modules" / "@modelcontextprotocol"
INSTALL = (
    "npm install --prefix tests/.mcp-npm --no-audit --no-fund "
    "@modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/server-everything@2026.8.31"
)


def npm_server(package: str) -> str:
    """The entry script of ``@modelcontextprotocol/<package>`` as installed by ``.ci/run``."""
    entry = NPM / package / "dist" / "index.js"
    if not entry.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{entry} is missing: .ci/run installs it ({INSTALL})")
        pytest.skip(f"{package} is not installed: {INSTALL}")
    return str(entry)


def claude_desktop_env(folder: Path, servers: dict[str, dict]) -> Path:
    """An environment whose servers are given in a Claude Desktop ``claude_desktop_config.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "claude_desktop_config.json").write_text(json.dumps({"mcpServers": servers}))
    (folder / "env.yaml").write_text(
        "tools:\n  mcp_config: claude_desktop_config.json\nlimits: {call_timeout_s: 20}\n"
    )
    return folder / "env.yaml"


def test_server_filesystem_serves_the_folder_its_command_line_names(tmp_path: Path) -> None:
    """The filesystem server's README config, ``server-filesystem /path/to/allowed``, gives the model that
    folder. Told the environment's folder as its MCP root, the server let the root replace it: the model was
    denied the corpus it was meant to read and could read the environment's own files (its answers, its
    reward code) instead, from a moment after start on (the server asks for roots in the background)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("the corpus\n")
    entry = npm_server("server-filesystem")
    env_file = claude_desktop_env(
        tmp_path / "env", {"filesystem": {"command": "node", "args": [entry, str(corpus)]}}
    )
    (tmp_path / "env" / "answers.txt").write_text("42\n")
    with Environment.load(env_file) as env:
        # The server asks for roots once initialized, in the background: calls right after the handshake
        # still see its command-line folders, those a moment later the roots it was told.
        env.executor.execute([ToolCall("list_allowed_directories", {})])
        time.sleep(1.0)
        allowed, read, private = env.executor.execute(
            [
                ToolCall("list_allowed_directories", {}),
                ToolCall("read_text_file", {"path": str(corpus / "a.txt")}),
                ToolCall("read_text_file", {"path": str(tmp_path / "env" / "answers.txt")}),
            ]
        )
    assert allowed.observation.splitlines()[1:] == [str(corpus)], allowed.observation
    assert read.ok and read.observation == "the corpus\n", read.observation
    assert not private.ok and "Access denied" in private.observation, private.observation


def test_server_filesystem_reads_a_binary_file_as_text_for_a_model(tmp_path: Path) -> None:
    """A binary file through server-filesystem: ``read_media_file`` (an embedded blob resource) reads as
    the file's URI, type and size, not base64 nor a bare URI; ``read_text_file`` (the bytes decoded as
    UTF-8 by the server) has no raw control character left, each run of them shown visibly."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "x.bin").write_bytes(bytes(range(256)) * 4)
    entry = npm_server("server-filesystem")
    env_file = claude_desktop_env(
        tmp_path / "env", {"filesystem": {"command": "node", "args": [entry, str(corpus)]}}
    )
    with Environment.load(env_file) as env:
        media, text = env.executor.execute(
            [
                ToolCall("read_media_file", {"path": str(corpus / "x.bin")}),
                ToolCall("read_text_file", {"path": str(corpus / "x.bin")}),
            ]
        )
    uri = (corpus / "x.bin").as_uri()
    assert media.ok and media.observation == f"<resource {uri}> [binary: application/octet-stream, 1.0 kB]"
    assert text.ok and not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", text.observation)
    assert text.observation.startswith("[9 control characters]\t\n\\u000b\\u000c\r[18 control characters] !")


def test_server_everything_results_read_as_text_for_a_model(tmp_path: Path) -> None:
    """server-everything's tools, each shape of result once: images are described (type and size), never
    base64; resource links and embedded resources are named; structured content is JSON; a wrong or missing
    argument and an unknown tool are error observations; the task-only tool is left out; every schema the
    prompt gets is the server's own, under a valid function name, less zod's ``"$schema"``."""
    entry = npm_server("server-everything")
    env_file = claude_desktop_env(
        tmp_path / "env", {"everything": {"command": "node", "args": [entry, "stdio"]}}
    )
    with Environment.load(env_file) as env:
        schemas = {s["function"]["name"]: s["function"] for s in env.tool_schemas()}
        records = env.executor.execute(
            [
                ToolCall("get-tiny-image", {}),
                ToolCall("get-annotated-message", {"messageType": "success", "includeImage": True}),
                ToolCall("get-resource-links", {"count": 2}),
                ToolCall("get-resource-reference", {"resourceType": "Blob", "resourceId": 2}),
                ToolCall("get-structured-content", {"location": "Chicago"}),
                ToolCall("trigger-long-running-operation", {"duration": 0.2, "steps": 2}),
                ToolCall("get-sum", {"a": "1", "b": 2}),
                ToolCall("echo", {}),
                ToolCall("simulate-research-query", {"topic": "x"}),
            ]
        )
    image, annotated, links, blob, structured, long_running, wrong_type, missing, task_only = records
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) for name in schemas)
    assert schemas["echo"]["parameters"]["required"] == ["message"]
    assert not [name for name, schema in schemas.items() if "$schema" in schema["parameters"]]  # zod's
    assert "simulate-research-query" not in schemas
    for record in (image, annotated):
        assert record.ok and "[image: image/png, " in record.observation, record.observation
        assert "iVBOR" not in record.observation and len(record.observation) < 300  # no PNG as base64
    assert links.ok and links.observation.count("<resource demo://resource/") == 2, links.observation
    assert blob.ok and "<resource demo://resource/dynamic/blob/2> [binary: text/plain, " in blob.observation
    assert structured.ok and "temperature" in json.loads(structured.observation), structured.observation
    assert long_running.ok and "completed" in long_running.observation, long_running.observation
    assert not wrong_type.ok and "expected number, received string at a" in wrong_type.observation
    assert not missing.ok and "received undefined at message" in missing.observation, missing.observation
    assert not task_only.ok and "unknown tool 'simulate-research-query'" in task_only.observation
