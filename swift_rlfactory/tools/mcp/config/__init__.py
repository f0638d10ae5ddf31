"""MCP server configuration as real clients write it (Claude Desktop, Cursor, VS Code, Codex, Goose, ...),
validated into :class:`McpConfig`: one reader module per client dialect. See docs/mcp.md, "Config dialects"."""

from .files import read_config_file, workspace_folder
from .server import PASSTHROUGH_ENV, PYTHON_COMMANDS, McpServerConfig
from .servers import McpConfig

__all__ = [
    "PASSTHROUGH_ENV",
    "PYTHON_COMMANDS",
    "McpConfig",
    "McpServerConfig",
    "read_config_file",
    "workspace_folder",
]
