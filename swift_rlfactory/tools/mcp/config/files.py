"""Reading an MCP config file (JSON with comments, YAML, TOML) and the folder its relative paths start from."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from swift_rlfactory.data import yaml_errors

# Folders a client keeps its project config in; the workspace is the folder above (VS Code's
# ``${workspaceFolder}`` of ``.vscode/mcp.json``). Continue and Kiro nest one level deeper.
_CLIENT_FOLDERS = frozenset(
    {".vscode", ".cursor", ".gemini", ".roo", ".kilocode", ".windsurf", ".codeium", ".zed", ".continue",
     ".kiro", ".amazonq", ".claude", ".opencode", ".codex"}
)  # fmt: skip
_CLIENT_SUBFOLDERS = frozenset({"mcpServers", "settings"})


def workspace_folder(path: Path) -> Path:
    """The folder a config file's ``${workspaceFolder}``, relative paths and default ``cwd`` start from: the
    file's own folder, or the project folder above it for a file a client keeps in its own folder
    (``proj/.vscode/mcp.json``, ``proj/.cursor/mcp.json``, ``proj/.continue/mcpServers/x.yaml`` -> ``proj``)."""
    folder = path.parent
    if folder.name in _CLIENT_SUBFOLDERS and folder.parent.name in _CLIENT_FOLDERS:
        folder = folder.parent
    return folder.parent if folder.name in _CLIENT_FOLDERS else folder


def read_config_file(path: Path) -> Any:
    """The data of an MCP config file: YAML or TOML (Codex's ``config.toml``) by extension, otherwise JSON
    with comments and trailing commas allowed (VS Code's and Zed's files are JSONC). A UTF-8 byte order
    mark (Windows editors write one) is skipped. Raises ``ValueError`` saying what is wrong."""
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:  # says where, never what: a value may be a key
            raise ValueError(f"not valid TOML: {exc}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"not valid YAML: {yaml_errors.describe(exc)}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(_JSONC.sub(lambda m: m.group(1) or "", text))
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None


# A string (kept), or a comment or a trailing comma (dropped); strings first, so "http://x" survives.
_JSONC = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/|,(?=\s*[}\]])', re.DOTALL)


def read_dotenv(path: Path) -> dict[str, str]:
    """``KEY=value`` lines of a VS Code ``envFile`` (``#`` comments, optional quotes and ``export``)."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except OSError as exc:
        raise ValueError(f"envFile {path}: {exc.strerror or exc}") from None
    env = {}
    for line in lines:
        line = line.strip().removeprefix("export ").strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip().strip("'\"")
    return env
