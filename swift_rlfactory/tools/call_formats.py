"""The tool-call formats we read, by name, and the parser of each for one set of tools.

The format is the one the prompt asks for: the system prompt's tools block is rendered by the model's
ms-swift agent template, and ``adapters.swift_template.call_format`` names which of these formats that
template tells the model to write (or refuses the template at start-up). Training's scheduler, the eval
CLI and ``swift rollout`` all take the parser from :func:`call_parser`, so they read a turn alike.

* ``hermes`` - ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (:mod:`.parsing`);
* ``qwen3_coder`` - ``<tool_call><function=NAME><parameter=KEY>value</parameter></function></tool_call>``
  (:mod:`.xml_calls`), values typed by the tools' schemas.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from .parsing import ToolCall, parse_tool_calls
from .xml_calls import parse_xml_tool_calls, schema_properties

CallParser = Callable[[str], list[ToolCall]]
"""Model text in, the calls in it out (error calls included); never raises."""

HERMES = "hermes"
QWEN3_CODER = "qwen3_coder"
CALL_FORMATS = (HERMES, QWEN3_CODER)


def call_parser(call_format: str, tools: Sequence[Mapping[str, Any]] | None = None) -> CallParser:
    """The parser of ``call_format`` for a conversation offering ``tools`` (OpenAI-style schemas)."""
    if call_format == HERMES:
        return parse_tool_calls
    if call_format == QWEN3_CODER:
        return partial(parse_xml_tool_calls, properties=schema_properties(tools))
    raise ValueError(f"unknown tool-call format {call_format!r}: use one of {', '.join(CALL_FORMATS)}")
