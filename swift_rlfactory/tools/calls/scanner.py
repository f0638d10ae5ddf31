"""The shared scanner: where the ``<tool_call>`` blocks of a reply are (reasoning left out, tags inside a
call's argument taken as its text), what the reply says around them, and call objects written in prose."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterator

from .call import Body, ToolCall
from .call_objects import calls_in
from .json_reader import read_block, read_one
from .tags import (
    FUNCTION_OPEN,
    NEXT_CALL,
    OPEN,
    PARAM_CLOSE,
    PARAM_OPEN,
    PARAM_TAG,
    THINK_CLOSE,
    THINK_OPEN,
    TURN_PATTERN,
    TURN_TOKEN,
)

BlockReader = Callable[[str, int], Body]
"""Reads one block's body from where it starts (after ``<tool_call>``) in a text."""

_MARK = re.compile(rf"<think>|</think>|<tool_call>|{TURN_PATTERN}")
# Where a call object may start inside prose: ``{"name": "search"`` (Llama's ``{"type": "function",`` first
# allowed), single quotes too; the name is captured so that only a known tool's object is read. An object
# that opens with its arguments (``{"parameters": {...}, "name": "search"}``) has no name to capture here:
# it is read, and is a call if its name turns out to be a known tool's.
_CALL_START = re.compile(
    r"""\{\s*(?:["']type["']\s*:\s*["']function["']\s*,\s*)?"""
    r"""(?:["']name["']\s*:\s*["']((?:[^"'\\\n]|\\.){1,256})["']|["'](?:parameters|arguments)["']\s*:)"""
)


def visible_text(text: str) -> str:
    """``text`` without its reasoning and its ``<tool_call>`` blocks: what the reply says outside them."""
    return "".join(scan(text)[1])


def has_tool_call(text: str) -> bool:
    """Whether ``text`` opens a hermes tool call outside its reasoning."""
    return bool(scan(text)[0])


def scan(text: str, read: BlockReader = read_block) -> tuple[list[tuple[int, Body]], list[str]]:
    """The ``<tool_call>`` blocks outside reasoning (with where each body starts), and the text around them.

    ``read`` reads one block's body from where it starts (default: hermes JSON)."""
    pos = since = 0  # ``since``: where the calls that may hold the next tag start
    thought = False  # whether a think block was seen yet
    blocks: list[tuple[int, Body]] = []
    visible: list[str] = []
    last_value_close = text.rfind(PARAM_CLOSE)
    while (mark := _MARK.search(text, pos)) is not None:
        visible.append(text[pos : mark.start()])
        if TURN_TOKEN.fullmatch(mark[0]):  # never the model's text; any block it ended was read
            pos = mark.end()
        elif mark[0] == THINK_CLOSE and thought:  # closes nothing: text (in a call's string, say)
            visible.append(THINK_CLOSE)
            pos = mark.end()
        elif (end := _argument_end(text, since, mark.start(), last_value_close)) is not None:  # argument text
            visible.append(TURN_TOKEN.sub("", text[mark.start() : end]))
            pos = since = end
        elif mark[0] == OPEN:
            body = read(text, mark.end())
            blocks.append((mark.end(), body))
            pos = since = body.resume
        elif mark[0] == THINK_OPEN:
            close = text.find(THINK_CLOSE, mark.end())
            if close < 0:  # never closed: the rest is reasoning
                return blocks, visible
            pos = since = close + len(THINK_CLOSE)
            thought = True
        else:  # the first </think> outside any block closes a think block the prompt opened
            blocks, visible, thought = [], [], True
            pos = since = mark.end()
    visible.append(text[pos:])
    return blocks, visible


def _argument_end(text: str, start: int, mark: int, last_value_close: int) -> int | None:
    """Where the call argument that holds the tag at ``mark`` (a think tag, ``<tool_call>``) ends, or
    ``None`` when it is in none.

    The argument is a string of a call object that starts in ``text[start:mark]`` (found and read as
    :func:`json_calls_in_prose` does, whatever its name) and reads whole across the tag, or the value of
    an XML ``<parameter=NAME>`` opened there and closed by a ``</parameter>`` after the tag (the last one
    in ``text`` is at ``last_value_close``), unless the tag opens an XML call (``<tool_call><function=``):
    then the value was never closed, or was prose that shows the syntax. Call objects are read one after
    another and the first that cannot be read ends the search, and no value is looked for past the last
    ``</parameter>``, so each character is read about once, however many tags the text holds.
    """
    for _, end in _call_spans(text, start, mark):
        if end > mark:
            return end
    opened = text.rfind(PARAM_OPEN, start, mark)  # the last XML value before the tag: still open?
    if (
        opened < 0
        or mark > last_value_close
        or NEXT_CALL.match(text, mark)
        or not PARAM_TAG.match(text, opened, mark)
        or text.find(PARAM_CLOSE, opened, mark) >= 0
    ):
        return None
    close = text.find(PARAM_CLOSE, mark)
    return None if close < 0 else close + len(PARAM_CLOSE)


def _call_spans(text: str, pos: int, starts_before: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of the call objects that start in ``text[pos:starts_before]``, one after another,
    whatever their names, each read as :func:`json_calls_in_prose` reads one (an object may end past
    ``starts_before``); the first that cannot be read ends them."""
    while (call := _CALL_START.search(text, pos, starts_before)) is not None:
        body = read_one(text, call.start())
        if body.error is not None:
            return
        yield call.start(), body.end
        pos = body.end


def call_arguments(text: str) -> list[tuple[int, int]]:
    """Where the calls written without tags are in a visible reply, whatever their names: ``(start, end)``
    of each call object (found and read as :func:`json_calls_in_prose` finds and reads one) and of each
    XML ``<parameter=NAME>`` value closed by its ``</parameter>`` from the first ``<function=`` on (where
    an untagged XML call can start), in order, none inside another.

    A tag in one of them is the argument's text, by the rule :func:`scan` applies to think tags
    and ``<tool_call>``: rewards read ``<answer>`` so (:func:`~swift_rlfactory.rewards.rules.extract_answer`).
    The names are not needed: a tag inside a JSON string or an XML value is never the reply's own. As
    there, the first call object that cannot be read ends the search for call objects, so each character
    is read about once.
    """
    spans = list(_call_spans(text, 0, len(text)))
    pos = text.find(FUNCTION_OPEN)
    while pos >= 0 and (value := PARAM_TAG.search(text, pos)) is not None:
        close = text.find(PARAM_CLOSE, value.end())
        if close < 0:
            break
        pos = close + len(PARAM_CLOSE)
        spans.append((value.start(), pos))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):  # a JSON string may hold XML tags, and an XML value a call object
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def json_calls_in_prose(text: str, tool_names: Collection[str]) -> list[ToolCall]:
    """The call objects in ``text`` whose ``"name"`` is one of ``tool_names``, wherever they are, in order.

    Each is read from its ``{`` with the rules of a block (near-JSON repaired, refusals as errors); text
    around it is left alone. The first object of a known name that cannot be read is an error call and
    ends the search (one clear error is enough, and the search stays linear). An object whose name is
    not offered is not looked at: it is prose.
    """
    calls: list[ToolCall] = []
    pos = 0
    while tool_names and (start := _CALL_START.search(text, pos)) is not None:
        if start[1] is None:  # arguments first: a call only if it reads whole and names a known tool
            body = read_one(text, start.start())
            value = body.values[0] if body.error is None else None
            named = value.get("name") if isinstance(value, dict) else None
            if not (isinstance(named, str) and named.strip() in tool_names):
                if body.error is not None:  # unreadable to the end of the text: nothing after it is read
                    break
                pos = start.end()
                continue
            name = named.strip()
        else:
            name = _unescaped(start[1]).strip()
            if name not in tool_names:
                pos = start.end()
                continue
            body = read_one(text, start.start())
        raw = text[start.start() : body.end]
        if body.error is not None:
            calls.append(ToolCall(name=name, error=body.error, raw=raw))
            break
        calls.extend(calls_in(body.values[0], raw))
        pos = body.end
    return calls


def _unescaped(name: str) -> str:
    """A name as written between quotes, its JSON escapes read (``search\\t`` is ``search`` and a tab)."""
    try:
        return json.loads(f'"{name}"') if "\\" in name else name
    except ValueError:
        return name
