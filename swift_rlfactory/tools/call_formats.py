"""The tool-call formats we read, by name, and the parser of each for one set of tools.

The format is the one the prompt asks for: the system prompt's tools block is rendered by the model's
ms-swift agent template, and ``adapters.swift_template.call_format`` names which of these formats that
template tells the model to write (or refuses the template at start-up). Training's scheduler, the eval
CLI and ``swift rollout`` all take the parser from :func:`call_parser`, so they read a turn alike.

* ``hermes`` - ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (:mod:`.parsing`);
* ``llama3_json`` - Llama 3's and Llama 4's ``{"name": ..., "parameters": {...}}``, after prose or
  ``<|python_tag|>`` too (:func:`.parsing.parse_json_calls`); ``<tool_call>`` blocks read as hermes;
* ``qwen3_coder`` - ``<tool_call><function=NAME><parameter=KEY>value</parameter></function></tool_call>``
  (:mod:`.xml_calls`), values typed by the tools' schemas.

A call object naming an offered tool is never taken for an answer: in the formats that do not read it
where it stands (hermes outside a block, any JSON for ``qwen3_coder``) it is an error call that shows the
format the prompt asked for. Only names of ``tools`` count, so JSON in an answer stays an answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from .parsing import (
    _PYTHON_TAG,
    ToolCall,
    _bare_calls,
    _Body,
    _read,
    _scan,
    _unwrapped,
    parse_json_calls,
    parse_tool_calls,
)
from .xml_calls import _FUNCTION, BARE_XML_CALL, _read_xml, parse_xml_tool_calls, schema_properties

CallParser = Callable[[str], list[ToolCall]]
"""Model text in, the calls in it out (error calls included); never raises."""

HERMES = "hermes"
LLAMA3_JSON = "llama3_json"
QWEN3_CODER = "qwen3_coder"
CALL_FORMATS = (HERMES, LLAMA3_JSON, QWEN3_CODER)


def call_parser(call_format: str, tools: Sequence[Mapping[str, Any]] | None = None) -> CallParser:
    """The parser of ``call_format`` for a conversation offering ``tools`` (OpenAI-style schemas)."""
    properties = schema_properties(tools)
    if call_format == HERMES:
        return partial(parse_tool_calls, tool_names=frozenset(properties))
    if call_format == LLAMA3_JSON:
        return partial(parse_json_calls, tool_names=frozenset(properties))
    if call_format == QWEN3_CODER:
        return partial(parse_xml_tool_calls, properties=properties)
    raise ValueError(f"unknown tool-call format {call_format!r}: use one of {', '.join(CALL_FORMATS)}")


@dataclass(frozen=True)
class Reply:
    """One assistant turn read once for rewards: its ``visible`` text (reasoning and ``<tool_call>``
    blocks removed, each block as the parser of its format reads it) and whether it ``writes_call`` in
    any format we read."""

    visible: str
    writes_call: bool


def read_reply(text: str) -> Reply:
    """``text`` scanned once, whatever format its prompt asked for (rewards do not know it).

    A turn writes a call when it has a ``<tool_call>`` block outside its reasoning (JSON or XML, readable
    or not: each parser makes any block a call or an error call), or, without a block, when its visible
    reply is nothing but call JSON (hermes's and Llama's bare call), starts with ``<function=`` (an XML
    call without its tags) or holds Llama's ``<|python_tag|>``. Call objects inside prose are not seen:
    telling them from an answer that quotes JSON takes the names of the tools offered, which the parsers
    have and a reward does not (the answers in their arguments are not answers all the same:
    :func:`.parsing.call_arguments`).

    A block that opens with ``<function=`` is read as Qwen3-Coder's XML, the only parser that runs it,
    so a ``</tool_call>`` inside one of its values is the value's text, not the end of the block.
    """
    blocks, visible = _scan(text, _block)
    rest = "".join(visible)
    if blocks:
        return Reply(rest, True)
    bare = (
        rest.lstrip().startswith(BARE_XML_CALL) or _PYTHON_TAG in rest or bool(_bare_calls(_unwrapped(rest)))
    )
    return Reply(rest, bare)


def _block(text: str, pos: int) -> _Body:
    """One ``<tool_call>`` block's body as the parser that runs it reads it: XML when it opens with
    ``<function=`` (without the tools' schemas: a value left untyped is never refused, so the block ends
    where its XML does), else hermes JSON."""
    return _read_xml(text, pos, {}) if _FUNCTION.match(text, pos) else _read(text, pos)
