"""Find tool calls in model text.

The default format is hermes, used by Qwen2.5 and Qwen3 chat templates::

    <tool_call>
    {"name": "search", "arguments": {"query": "capital of France"}}
    </tool_call>

Small models write near-JSON (single quotes, trailing commas, a missing brace, a code fence around the
object); ``json-repair`` fixes what it can. Some also drop the tags: a reply that is nothing but one valid
call object, ``{"name": ..., "arguments": {...}}`` (fenced or not), counts as that call. Whatever still cannot be read becomes a :class:`ToolCall` with
``error`` set, which the executor turns into an observation the model sees, never an exception.

Other ms-swift agent templates parse through the template itself (see ``adapters.swift``); this module is
pure and has no ms-swift dependency.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import json_repair

_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")
_THINK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)


@dataclass
class ToolCall:
    """One call the model asked for. ``error`` is set when the call could not be understood."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    raw: str = ""


def has_tool_call(text: str) -> bool:
    """Whether ``text`` opens a hermes tool call at all."""
    return "<tool_call>" in text


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Every ``<tool_call>`` block in ``text`` (an unclosed last block counts: generation may stop at it).

    Without any block, a reply that is only a call object is that one call (see :func:`parse_bare_call`).
    """
    blocks = _TOOL_CALL.findall(text)
    if blocks:
        return [parse_call_body(body) for body in blocks]
    bare = parse_bare_call(text)
    return [bare] if bare is not None else []


def parse_bare_call(text: str) -> ToolCall | None:
    """The call in a reply that is nothing but ``{"name": ..., "arguments": {...}}``, else ``None``.

    Small models (Qwen2.5-Coder-0.5B, for one) write the hermes call object without its ``<tool_call>``
    tags, sometimes in a code fence. Only strict JSON with a string ``name`` and an object of
    ``arguments`` (or ``parameters``) counts, so prose, answers and stray JSON stay what they are.
    """
    body = _FENCE.sub("", _THINK.sub("", text).strip()).strip()
    if not (body.startswith("{") and body.endswith("}")):
        return None
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    if not isinstance(obj.get("arguments", obj.get("parameters")), dict):
        return None
    return ToolCall(name=obj["name"], arguments=obj.get("arguments", obj.get("parameters")), raw=text)


def parse_call_body(body: str) -> ToolCall:
    """Read one call object ``{"name": ..., "arguments": {...}}`` from its (possibly broken) JSON text."""
    raw = body
    body = _FENCE.sub("", body.strip())
    if not body:
        return ToolCall(name="", error="empty <tool_call> block", raw=raw)
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        obj = json_repair.loads(body)
    if not isinstance(obj, dict):
        return ToolCall(name="", error=f"tool call is not a JSON object: {body[:200]}", raw=raw)
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return ToolCall(name="", error=f'tool call has no "name": {body[:200]}', raw=raw)
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):
        arguments = json_repair.loads(arguments) if arguments.strip() else {}
    if not isinstance(arguments, dict):
        return ToolCall(name=name, error=f'"arguments" must be a JSON object, got: {arguments!r}', raw=raw)
    return ToolCall(name=name, arguments=arguments, raw=raw)
