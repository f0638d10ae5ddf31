"""Tool calls in model text: an open registry of call formats (hermes, Llama JSON, Qwen3-Coder XML; a
format registers itself), the parser of each, and the scanner they share. The formats: docs/tool-calls.md."""

from .call import ToolCall
from .hermes import HERMES, hermes_call, parse_tool_calls
from .llama import LLAMA3_JSON, parse_json_calls
from .qwen3_coder import QWEN3_CODER, parse_xml_tool_calls
from .registry import CallFormat, CallParser, call_formats, call_parser, register, registered
from .reply import Reply, read_reply
from .tags import without_reasoning

__all__ = [
    "HERMES",
    "LLAMA3_JSON",
    "QWEN3_CODER",
    "CallFormat",
    "CallParser",
    "Reply",
    "ToolCall",
    "call_formats",
    "call_parser",
    "hermes_call",
    "parse_json_calls",
    "parse_tool_calls",
    "parse_xml_tool_calls",
    "read_reply",
    "register",
    "registered",
    "without_reasoning",
]
