"""Llama 3's and Llama 4's calls (ms-swift's ``llama3``/``llama4`` agent templates): call JSON with
``"parameters"``, written after prose or ``<|python_tag|>``, one or several in a reply."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import partial

from .call import ToolCall, quote
from .call_objects import bare_calls, block_calls
from .registry import CallParser, Tools, register
from .scanner import json_calls_in_prose, scan
from .schema_types import schema_properties
from .tags import OPEN

LLAMA3_JSON = "llama3_json"
PYTHON_TAG = "<|python_tag|>"
"""Llama 3.1 opens a tool call with it."""


def parse_json_calls(text: str, tool_names: Collection[str] = ()) -> list[ToolCall]:
    """Llama's calls in ``text``, in order; never raises (the rules: docs/tool-calls.md).

    ``<tool_call>`` blocks and a reply that is nothing but call JSON read as in hermes, otherwise every
    call object naming one of ``tool_names`` in the visible reply is a call; ``<|python_tag|>`` with no
    call after it is an error call.
    """
    blocks, visible = scan(text)
    reply = "".join(visible)
    if blocks:
        # A <tool_call> in a string of a Llama call ({"name": "echo", "parameters": {"s": "<tool_call>"}})
        # is argument text. scan reads it so unless a call object it cannot read comes first (it stops
        # there, to stay linear): read the reply as written from the first tag on, and keep it if a call
        # that starts before the tag reads whole across it.
        tag = blocks[0][0] - len(OPEN)
        if "{" not in text[:tag]:  # no call object can start before the tag
            return block_calls(text, blocks)
        before = "".join(scan(text[:tag])[1])
        written = before + text[tag:]
        calls = _llama_calls(written, tool_names)
        if not any(c.error is None and OPEN in c.raw and written.find(c.raw) < len(before) for c in calls):
            return block_calls(text, blocks)
        reply = written
    else:
        calls = _llama_calls(reply, tool_names)
    tag = reply.find(PYTHON_TAG)
    if not calls and tag >= 0:  # Llama's own start of a call: never an answer
        shown = quote(reply[tag + len(PYTHON_TAG) :].strip())
        message = f'after {PYTHON_TAG} write a call as {{"name": NAME, "parameters": {{...}}}}, got: {shown}'
        calls = [ToolCall(name="", error=message, raw=reply[tag:])]
    return calls


def _llama_calls(reply: str, tool_names: Collection[str]) -> list[ToolCall]:
    """The calls of a visible reply read as Llama writes them: all call JSON, else call objects in prose."""
    rest = unwrapped(reply)
    return bare_calls(rest) or json_calls_in_prose(rest, tool_names)


def unwrapped(reply: str) -> str:
    """A visible reply without Llama's ``<|python_tag|>`` before its call (its end of message after it, a
    turn token, is never visible)."""
    return reply.strip().removeprefix(PYTHON_TAG)


@dataclass(frozen=True)
class _Llama:
    """Llama 3's and 4's JSON calls, after prose or ``<|python_tag|>``."""

    name: str = LLAMA3_JSON

    def parser(self, tools: Tools) -> CallParser:
        """:func:`parse_json_calls` for the names of ``tools``."""
        return partial(parse_json_calls, tool_names=frozenset(schema_properties(tools)))


register(_Llama())
