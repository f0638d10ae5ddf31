"""Tools: protocol, Python and MCP backends, parsing, the concurrent executor and its cache."""

from .base import Tool, ToolError, ToolProvider, ToolSpec, TransportError
from .cache import ToolCache
from .calls import ToolCall, parse_tool_calls
from .episode_state import Episode, EpisodeState
from .executor import ExecutorClosed, Limits, ToolExecutor, ToolRecord
from .mcp import McpProvider, mcp_providers
from .media import ToolImage
from .python_tool import PythonTool, tool

__all__ = [
    "Episode",
    "EpisodeState",
    "ExecutorClosed",
    "Limits",
    "McpProvider",
    "PythonTool",
    "Tool",
    "ToolCache",
    "ToolCall",
    "ToolError",
    "ToolImage",
    "ToolExecutor",
    "ToolProvider",
    "ToolRecord",
    "ToolSpec",
    "TransportError",
    "mcp_providers",
    "parse_tool_calls",
    "tool",
]
