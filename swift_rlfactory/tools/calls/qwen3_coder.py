"""Qwen3-Coder's and Qwen3.5's XML calls (ms-swift's ``qwen3_coder`` and ``qwen3_5`` agent templates):
``<tool_call><function=NAME><parameter=KEY>value</parameter></function></tool_call>``, values typed by the
tools' schemas (the rules: docs/tool-calls.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from .call import Body, ToolCall, misplaced, near, quote
from .call_objects import block_calls
from .registry import CallParser, Tools, register
from .scanner import json_calls_in_prose, scan
from .schema_types import Properties, Unreadable, schema_properties, typed
from .tags import NEXT_CALL, PARAM_CLOSE, TURN_TOKEN, block_end, ends_block, past_end

QWEN3_CODER = "qwen3_coder"
FUNCTION = re.compile(r"\s*<function=([^>\n]*)>")
"""An XML call's first tag, white space before it allowed: where a block holds XML, not JSON."""
_FUNCTION_TAG = re.compile(r"<function=([^>\n]*)>")
_PARAMETER = re.compile(r"\s*<parameter=([^>\n]*)>")
_FUNCTION_END = re.compile(r"\s*</function>")
BARE_XML_CALL = "<function="
"""How a reply that is nothing but XML calls, without ``<tool_call>`` tags, starts."""
_SPACE = re.compile(r"\s*")


def parse_xml_tool_calls(
    text: str, tools: Sequence[Mapping[str, Any]] | None = None, *, properties: dict | None = None
) -> list[ToolCall]:
    """Every XML call in ``text``, in order, values typed by ``tools`` (OpenAI-style schemas).

    ``properties`` is :func:`schema_properties` of the tools, when the caller has it already. A JSON call
    object naming one of the tools outside any block (hermes or Llama style) is an error call that shows
    the XML format, not an answer. Never raises.
    """
    properties = schema_properties(tools) if properties is None else properties

    def read(body_text: str, pos: int) -> Body:
        return read_xml(body_text, pos, properties)

    blocks, visible = scan(text, read)
    if not blocks:
        rest = "".join(visible)
        start = _untagged_start(rest, properties)
        if start is None:
            return misplaced(json_calls_in_prose(rest, properties.keys()), xml_example)
        blocks = [(start, read_xml(rest, start, properties, in_block=False))]
        text = rest
    return block_calls(text, blocks)


def _untagged_start(reply: str, properties: dict[str, Properties]) -> int | None:
    """Where the ``<function=...>`` calls of a reply without ``<tool_call>`` tags start: at its start (any
    name), or after prose at the first ``<function=NAME>`` of an offered tool (a tag merely mentioned in
    prose names none), as vLLM's reader finds them; ``None`` when there are none."""
    start = len(reply) - len(reply.lstrip())
    if reply.startswith(BARE_XML_CALL, start):
        return start
    for function in _FUNCTION_TAG.finditer(reply):
        if function[1].strip() in properties:
            return function.start()
    return None


def xml_example(name: str) -> str:
    """How a call to ``name`` is written in the XML format, on one line for an error message."""
    return f"<tool_call><function={name}><parameter=NAME>value</parameter></function></tool_call>"


def read_xml(text: str, pos: int, properties: dict[str, Properties], in_block: bool = True) -> Body:
    """The call objects of one block's ``<function=...>`` elements, or the error that stopped reading."""
    values: list[Any] = []

    def failed(message: str) -> Body:  # a broken block ends at the next tag taken literally
        stop = block_end(text, at) if in_block else len(text)
        return Body(stop, past_end(text, stop), error=message)

    at = pos
    limit = -1  # in a block, values close before the next call's ``<tool_call><function=``: where it starts
    while True:
        after = _SPACE.match(text, at).end()
        if after >= len(text) or in_block and ends_block(text, after):
            return Body(after, past_end(text, after), values=values)
        function = FUNCTION.match(text, at)
        if function is None:
            if values:
                return failed(f"unexpected text after </function>: {near(text, after)}")
            return failed(f"expected <function=NAME> inside <tool_call>: {near(text, after)}")
        name = function[1].strip()
        at = function.end()
        arguments: dict[str, Any] = {}
        while (parameter := _PARAMETER.match(text, at)) is not None:
            key = parameter[1].strip()
            if limit < parameter.end():  # looked for once per block (it is the next block's start)
                limit = _value_limit(text, parameter.end()) if in_block else len(text)
            close = text.find(PARAM_CLOSE, parameter.end(), limit)
            if close < 0:
                return failed(f"parameter {quote(key)} is never closed with </parameter>")
            if key in arguments:
                return failed(f"parameter {quote(key)} is written twice")
            value = _unframed(text[parameter.end() : close])
            try:
                arguments[key] = typed(value, properties.get(name, {}).get(key))
            except Unreadable as exc:
                return failed(f"parameter {quote(key)}: {exc}")
            at = close + len(PARAM_CLOSE)
        values.append({"name": name, "arguments": arguments})
        closed = _FUNCTION_END.match(text, at)
        if closed is not None:
            at = closed.end()
            continue
        after = _SPACE.match(text, at).end()
        if after < len(text) and not (in_block and ends_block(text, after)):
            return failed(f"unexpected text in <function={name}>: {near(text, after)}")
        at = after  # </function> missing at the end of the block: nothing of the call is lost


def _value_limit(text: str, pos: int) -> int:
    """Where the values of a block from ``pos`` must close: before the next call's
    ``<tool_call><function=`` or the next turn token, whichever comes first."""
    following = NEXT_CALL.search(text, pos)
    limit = len(text) if following is None else following.start()
    turn = TURN_TOKEN.search(text, pos, limit)
    return limit if turn is None else turn.start()


def _unframed(value: str) -> str:
    """A parameter's text less the layout's newline after the opening tag and before the closing one.
    The first says how the layout is written: ``\r\n`` there makes the last ``\r\n`` layout too, while
    after ``\n`` a value ending in ``\r`` keeps it."""
    newline = "\r\n" if value.startswith("\r\n") else "\n"
    return value.removeprefix(newline).removesuffix(newline)


@dataclass(frozen=True)
class _Qwen3Coder:
    """Qwen3-Coder's XML calls, values typed by the tools' schemas."""

    name: str = QWEN3_CODER

    def parser(self, tools: Tools) -> CallParser:
        """:func:`parse_xml_tool_calls` with the parameter schemas of ``tools``."""
        return partial(parse_xml_tool_calls, properties=schema_properties(tools))


register(_Qwen3Coder())
