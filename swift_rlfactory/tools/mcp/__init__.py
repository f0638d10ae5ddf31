"""The MCP client: servers of ``mcpServers`` (stdio, streamable HTTP, SSE) as tool providers that heal
their own sessions. See docs/mcp.md for the protocol details, the healing rules and the config dialects."""

from .config import McpConfig, McpServerConfig
from .provider import McpProvider, McpTool, mcp_providers

__all__ = ["McpConfig", "McpProvider", "McpServerConfig", "McpTool", "mcp_providers"]
