"""The MCP client: servers of ``mcpServers`` (stdio, streamable HTTP, SSE) as tool providers that heal
their own sessions. See docs/mcp.md for the protocol details, the healing rules and the config dialects."""

from .config import McpConfig, McpServerConfig
from .listing import LARGE_SCHEMA_CHARS, schema_chars
from .provider import McpProvider, McpTool, mcp_providers

__all__ = [
    "LARGE_SCHEMA_CHARS",
    "McpConfig",
    "McpProvider",
    "McpServerConfig",
    "McpTool",
    "mcp_providers",
    "schema_chars",
]
