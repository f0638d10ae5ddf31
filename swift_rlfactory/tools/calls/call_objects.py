"""Call objects (``{"name": ..., "arguments": {...}}``) checked and turned into :class:`~.call.ToolCall`\\ s."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .call import Body, DuplicateKey, ToolCall, clean, no_constant, no_duplicates, quote, too_deep
from .json_reader import SPACE, fenced, read_block

MAX_NAME = 256
"""The longest tool name a call may give."""
_SURROGATE = re.compile("[\ud800-\udfff]")
_METADATA = frozenset({"id", "type", "index"})


class _Refused(ValueError):
    """What is wrong with a call object, in words the model can act on."""


def calls_in(value: Any, raw: str, bare: bool = False) -> list[ToolCall]:
    """The calls in one JSON value: a call object, or an array of them. ``bare``: the reply is nothing but
    call JSON, where a call must give its ``"arguments"``."""
    if isinstance(value, list):
        if not value:
            return [ToolCall(name="", error="an empty list of tool calls", raw=raw)]
        return [_call(item, raw, bare) for item in value]
    return [_call(value, raw, bare)]


def block_calls(text: str, blocks: list[tuple[int, Body]]) -> list[ToolCall]:
    """The calls of ``blocks`` read from ``text`` (whatever format read them): error calls for blocks that
    failed or held nothing, otherwise one call per value."""
    calls: list[ToolCall] = []
    for start, body in blocks:
        raw = text[start : body.end]
        if body.error is not None:
            calls.append(ToolCall(name="", error=body.error, raw=raw))
        elif not body.values:
            calls.append(ToolCall(name="", error="empty <tool_call> block", raw=raw))
        else:
            calls.extend(call for value in body.values for call in calls_in(value, raw))
    return calls


def bare_calls(text: str) -> list[ToolCall]:
    """The calls in a reply that is nothing but call JSON, else none: all of them valid, or it is no call."""
    inside = fenced(text, 0, len(text))
    body = (text[inside[0] : inside[1]] if inside else text).strip()
    if not body.startswith(("{", "[")):
        return []
    decoder = json.JSONDecoder(parse_constant=no_constant, object_pairs_hook=no_duplicates)
    values, pos = [], 0
    try:
        while pos < len(body):  # values one after another, only white space between them
            value, pos = decoder.raw_decode(body, pos)
            values.append(value)
            pos = SPACE.match(body, pos).end()
    except (ValueError, RecursionError):
        return []
    if any(too_deep(value) or value == [] for value in values):
        return []
    calls = [call for value in values for call in calls_in(value, text, bare=True)]
    return calls if all(call.error is None for call in calls) else []


def _call(obj: Any, raw: str, bare: bool) -> ToolCall:
    """One call object as a :class:`ToolCall`, or an error call saying what is wrong with it."""
    name = None
    try:
        if not isinstance(obj, dict):
            raise _Refused(f"tool call is not a JSON object: {quote(json.dumps(obj, ensure_ascii=False))}")
        obj = _unwrapped(obj)
        name = obj.get("name")
        if isinstance(name, str) and name.strip():  # the error calls below show it stripped
            name = name.strip()
        name = _name(obj)
        arguments = _arguments(obj, bare)
        _carried(name, arguments)
    except _Refused as exc:
        shown = clean(name)[:MAX_NAME] if isinstance(name, str) else ""
        return ToolCall(name=shown, error=str(exc), raw=raw)
    return ToolCall(name=name, arguments=arguments, raw=raw)


def _unwrapped(obj: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's ``{"type": "function", "function": {...}}`` unwrapped."""
    if not isinstance(obj.get("function"), dict) or "name" in obj:
        return obj
    unknown = sorted(obj.keys() - {"function"} - _METADATA)
    if unknown:
        raise _Refused(f'unexpected key {quote(unknown[0])} next to "function"')
    return obj["function"]


def _name(obj: dict[str, Any]) -> str:
    """The call's tool name, its outer white space stripped (no tool name has any)."""
    name = obj.get("name")
    if name is None:
        raise _Refused(f'tool call has no "name": {quote(json.dumps(obj, ensure_ascii=False))}')
    if not isinstance(name, str) or not name.strip():
        raise _Refused(
            f'"name" must be a non-empty string, got: {quote(json.dumps(name, ensure_ascii=False))}'
        )
    name = name.strip()
    if len(name) > MAX_NAME:
        raise _Refused(f'"name" is {len(name)} characters long, more than any tool name: {quote(name)}')
    return name


def _arguments(obj: dict[str, Any], bare: bool) -> dict[str, Any]:
    """The call's arguments object, from ``"arguments"`` or ``"parameters"``, decoded from a string if the
    model wrote it as one."""
    given = [key for key in ("arguments", "parameters") if key in obj]
    if len(given) == 2:
        raise _Refused('give "arguments" or "parameters", not both')
    unknown = sorted(obj.keys() - {"name", "arguments", "parameters"} - _METADATA)
    if unknown:
        raise _Refused(f'unexpected key {quote(unknown[0])} in the call: arguments go inside "arguments"')
    if bare and not given:
        raise _Refused('no "arguments"')
    key = given[0] if given else "arguments"
    arguments = obj.get(key)
    # OpenAI style: the object as a JSON string, or a string of that string (dumped twice). Each encoding
    # doubles the escapes, so a text holds only a few of them and this loop stays linear.
    while isinstance(arguments, str):
        if not arguments.strip():
            arguments = None
            break
        read = read_block(arguments, 0, in_block=False)
        if read.error is not None and read.error.endswith(DuplicateKey.SAYS):
            raise _Refused(f'"{key}": {read.error}')
        if read.error is not None or len(read.values) != 1:
            raise _Refused(f'"{key}" is a string that is not one JSON object: {quote(arguments)}')
        arguments = read.values[0]
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise _Refused(
            f'"{key}" must be a JSON object, got: {quote(json.dumps(arguments, ensure_ascii=False))}'
        )
    return arguments


def _carried(name: str, arguments: dict[str, Any]) -> None:
    """Refuse what no JSON transport can carry: infinite numbers and lone surrogates."""
    out_of_range = _non_finite(arguments)
    if out_of_range is not None:
        raise _Refused(
            f"argument {quote(out_of_range)} is out of range: a number this large reads as infinity, "
            "which no JSON transport can carry"
        )
    surrogate = _SURROGATE.search(name + json.dumps(arguments, ensure_ascii=False))
    if surrogate is not None:
        raise _Refused(
            f"lone surrogate \\u{ord(surrogate[0]):04x} in the call: write the character itself, "
            "or both halves of its surrogate pair"
        )


def _non_finite(arguments: dict[str, Any]) -> str | None:
    """Where the first infinite number in ``arguments`` is (``"opts.xs[1]"``), or ``None``.

    ``json.loads`` reads a number beyond float range (``1e400``) as ``inf``, although JSON has no such
    value: the call would reach an MCP server with ``null`` in its place (and Python tools with ``inf``).
    ``NaN`` cannot come from a number literal, and the literals are refused while reading.

    >>> _non_finite({"n": 1, "opts": {"xs": [0.5, float("-inf")]}})
    'opts.xs[1]'
    """
    stack: list[tuple[Any, str]] = [(value, key) for key, value in reversed(arguments.items())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return path
        if isinstance(item, dict):
            stack.extend((value, f"{path}.{key}") for key, value in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((value, f"{path}[{i}]") for i, value in reversed(list(enumerate(item))))
    return None
