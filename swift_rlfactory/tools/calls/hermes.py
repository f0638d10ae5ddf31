"""The hermes format (Qwen2.5, Qwen3): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from .call import ToolCall, misplaced, quote
from .call_objects import bare_calls, block_calls
from .registry import CallParser, Tools, register
from .scanner import json_calls_in_prose, scan
from .schema_types import schema_properties

HERMES = "hermes"


def parse_tool_calls(text: str, tool_names: Collection[str] = ()) -> list[ToolCall]:
    """Every call in ``text``, in order: calls that run, and error calls that explain themselves.

    ``tool_names``: the tools the conversation offers. A call object naming one of them outside any
    ``<tool_call>`` block (``Let me look. {"name": "search", ...}``, Llama's habit) is an error call that
    shows the hermes format, not an answer. Never raises, for any string; see docs/tool-calls.md.
    """
    blocks, visible = scan(text)
    if blocks:
        return block_calls(text, blocks)
    rest = "".join(visible)
    return bare_calls(rest) or misplaced(json_calls_in_prose(rest, tool_names), hermes_example)


def hermes_call(name: str, arguments: Mapping[str, Any]) -> str:
    """One call written as a Qwen model writes it in the hermes format (the scripted policies' demonstrations
    use it): ``<tool_call>``, the JSON object on its own line, ``</tool_call>``."""
    body = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def hermes_example(name: str) -> str:
    """How a call to ``name`` is written in the hermes format, on one line for an error message."""
    return f'<tool_call>{{"name": {quote(name)}, "arguments": {{...}}}}</tool_call>'


@dataclass(frozen=True)
class _Hermes:
    """Hermes JSON calls in ``<tool_call>`` blocks."""

    name: str = HERMES

    def parser(self, tools: Tools) -> CallParser:
        """:func:`parse_tool_calls` for the names of ``tools``."""
        return partial(parse_tool_calls, tool_names=frozenset(schema_properties(tools)))


register(_Hermes())
