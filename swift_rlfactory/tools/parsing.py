"""Find tool calls in model text: read what the model wrote, repair only what cannot change its meaning.

The default format is hermes, used by Qwen2.5 and Qwen3 chat templates::

    <tool_call>
    {"name": "search", "arguments": {"query": "capital of France"}}
    </tool_call>

:func:`parse_tool_calls` takes any string and returns the calls in it; it never raises, and its time grows
linearly with the text. A call that cannot be read is a :class:`ToolCall` with ``error`` set: the executor
turns it into an observation, so the model reads in one short line what was wrong and can try again.

Where calls are
    * Every ``<tool_call>`` block, in order. A block ends at the first ``</tool_call>`` *outside a JSON
      string* (inside one it is argument text, e.g. code that prints the tag), at the next ``<tool_call>``,
      or at the end of the text (generation may stop at the closing tag). Once a block is known to be
      broken, it ends at the next tag taken literally, so it never swallows the calls after it. Outside
      any block, a ``<tool_call>`` in a call's argument, as a think tag there (below), opens none: it is
      argument text, so ``{"name": "run", "arguments": {"code": "print('<tool_call>')"}}`` runs as written.
    * Reasoning is not acted on, as in Qwen3, Qwen-Agent and vLLM's reasoning split: calls inside
      ``<think>...</think>`` do not run, every think block counts, everything after a ``<think>`` that is
      never closed is reasoning, and a first ``</think>`` with no ``<think>`` before it closes a think block
      the chat template opened in the prompt (Qwen3 thinking models), so the text before it is reasoning.
      A later ``</think>`` closes nothing and stays text. Outside a ``<think>`` the model wrote, a think
      tag in a call's argument (a string of a call object that reads whole across it, an XML
      ``<parameter=...>`` value) is argument text too, so a call written without tags, with or without
      reasoning before it (``{"name": "run", "arguments": {"code": "print('</think>')"}}``), reaches the
      tool as written. Inside a ``<think>`` block the first ``</think>`` ends it, wherever it stands.
    * Without any block, a reply that is nothing but call JSON (fenced or not, after any reasoning) is that
      call, or those calls: an array, or call objects one after another. Only strict JSON with an explicit
      ``"arguments"`` (or ``"parameters"``) counts here, every call of the reply valid, so prose, answers
      and stray JSON stay what they are.
    * Given the names of the tools offered, a call object naming one of them elsewhere in the reply
      (``Let me look that up. {"name": "search", ...}``, Llama's habit, or after ``<|python_tag|>``) is
      found by :func:`json_calls_in_prose`: :func:`parse_json_calls` (Llama 3 and 4) runs it, while
      :func:`parse_tool_calls` makes it an error call that shows the ``<tool_call>`` format, so it never
      ends the episode as an answer. JSON naming no tool offered is prose.

What a call looks like
    ``{"name": ..., "arguments": {...}}``; ``"parameters"`` is the same as ``"arguments"``; arguments may be
    a JSON string holding the object (OpenAI style; a string of that string too, dumped twice), and may be
    missing, ``null`` or ``""`` for a tool without arguments. OpenAI's
    ``{"type": "function", "function": {...}}`` wrapper is unwrapped; ``"id"``, ``"type"`` and ``"index"``
    are ignored. One block may hold several calls: a JSON array of call objects, or call objects one after
    another. Refused: any other key (``{"name": "search", "query": "x"}`` would otherwise run without its
    query), a name that is not a non-empty string of at most 256 characters, arguments that are not an
    object, nesting deeper than :data:`MAX_DEPTH`, and lone surrogates (``"\\ud83d"``: half an emoji, which
    no tool, tokenizer or UTF-8 transport can carry).

What is repaired, and what is refused
    Small models write near-JSON. A repair is accepted only when every value the model wrote reaches the
    tool unchanged and nothing is added. Repaired: single-quoted strings, trailing commas, ``//`` and
    ``/* */`` comments, Python's ``True``/``False``/``None``, raw newlines and control characters inside
    strings, ``\\'`` for an apostrophe, a backslash before a character JSON cannot escape (``"\\d+"`` keeps
    its backslash), a code fence around the JSON, extra closing brackets after it, and closing brackets
    missing at the very end, but only after a complete string, literal or bracket (``{"n": 12`` may be a
    cut ``123``). Refused: a missing value (``{"y": }``), a missing colon or comma, a string that is never
    closed, unquoted words, numbers JSON does not know (``0x1F``, ``.5``, ``NaN``, ``Infinity``, and
    ``1e400``, which reads as infinity: no JSON transport or MCP server can carry them), mismatched
    brackets, and text before or after the JSON, which would be thrown away.

    The well-known ``json-repair`` library was tried first and is not used: it turns ``{"y": }`` into
    ``{"y": ""}``, silently drops ``"y"`` from ``{"q": "x" "y"}`` and the key from ``{"a": 1, "b"}`` (its
    repair log, ``logging=True``, is empty for both), and takes seconds for a megabyte of quotes. Here the
    text is split into JSON tokens by one regular expression, each token is written back as strict JSON one
    for one, and :func:`json.loads` reads the result; a token with no faithful JSON form, or JSON that
    still does not read, is an error that quotes the spot.

A key written twice in one object (``{"name": "a", "name": "b"}``, ``{"q": "x", "q": "y"}``) is refused
with its name: reading it would silently drop the first value. A name's outer white space is stripped.

Qwen3-Coder's and Qwen3.5's XML calls inside ``<tool_call>`` are read by :mod:`.xml_calls`;
:mod:`.call_formats` names the formats, and ``adapters.swift_template.call_format`` picks the one the
model's ms-swift agent template asks for (refusing, at start-up, the templates none of them reads). This
module is pure and has no ms-swift dependency.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 100
"""Deepest nesting of objects and arrays accepted in a call; no tool schema comes near it."""

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_MARK = re.compile(r"<think>|</think>|<tool_call>")
_PARAM_OPEN, _PARAM_CLOSE = "<parameter=", "</parameter>"  # an XML call's value (:mod:`.xml_calls`)
_PARAM_TAG = re.compile(r"<parameter=[^>\n]*>")
_FUNCTION_OPEN = "<function="  # an XML call's first tag
_NEXT_CALL = re.compile(r"<tool_call>\s*<function=")  # an XML call: an XML value before it never closed

# One JSON-ish token at a time. Strings use the unrolled-loop form and comments stop at a tag, so that
# matching stays linear in the text (a comment that ran to the end for every block would be quadratic).
_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<string>"[^"\\]*(?:\\.[^"\\]*)*")
    | (?P<quoted>'[^'\\]*(?:\\.[^'\\]*)*')
    | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?![\w.]))
    | (?P<literal>(?:true|false|null|True|False|None)(?![\w.]))
    | (?P<punct>[][{}:,])
    | (?P<comment>//(?:[^\n<]|<(?!/?tool_call>))*|/\*(?:[^*<]|\*(?!/)|<(?!/?tool_call>))*\*/)
    | (?P<fence>```[\w+-]*)
    | (?P<close></tool_call>)
    | (?P<open><tool_call>)
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|.)|"', re.DOTALL)
_JSON_ESCAPES = frozenset('"\\/bfnrt')
_PYTHON_LITERALS = {"True": "true", "False": "false", "None": "null"}
_CLOSER = {"{": "}", "[": "]"}
_COMPLETE = frozenset({"string", "literal", "}", "]"})  # tokens after which closing brackets may be missing
_FENCE = re.compile(r"```[\w+-]*[ \t]*\n?")
_SPACE = re.compile(r"\s*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_METADATA = frozenset({"id", "type", "index"})
# Where a call object may start inside prose: ``{"name": "search"`` (Llama's ``{"type": "function",`` first
# allowed), single quotes too; the name is captured so that only a known tool's object is read. An object
# that opens with its arguments (``{"parameters": {...}, "name": "search"}``) has no name to capture here:
# it is read, and is a call if its name turns out to be a known tool's.
_CALL_START = re.compile(
    r"""\{\s*(?:["']type["']\s*:\s*["']function["']\s*,\s*)?"""
    r"""(?:["']name["']\s*:\s*["']((?:[^"'\\\n]|\\.){1,256})["']|["'](?:parameters|arguments)["']\s*:)"""
)
_PYTHON_TAG = "<|python_tag|>"  # Llama 3.1 opens a tool call with it
_END_OF_MESSAGE = ("<|eom_id|>", "<|eom|>")  # Llama 3's and Llama 4's end of a turn that awaits a tool
_EXCERPT = 60
_MAX_NAME = 256


class DuplicateKey(ValueError):
    """A key written twice in one JSON object (raised by :func:`no_duplicates` while reading)."""

    SAYS = "is written twice in one object"

    def __init__(self, key: str):
        super().__init__(f"the key {_quote(key)} {self.SAYS}")
        self.key = key


def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook``: the object, or :class:`DuplicateKey` for a repeated key."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return out


@dataclass
class ToolCall:
    """One call the model asked for. ``error`` is set when the call will not run, and ``error_kind`` says
    why: ``"parse"`` (it could not be understood) or ``"limit"`` (one call too many for the turn)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    raw: str = ""
    error_kind: str = "parse"


def visible_text(text: str) -> str:
    """``text`` without its reasoning and its ``<tool_call>`` blocks: what the reply says outside them."""
    return "".join(_scan(text)[1])


def has_tool_call(text: str) -> bool:
    """Whether ``text`` opens a hermes tool call outside its reasoning."""
    return bool(_scan(text)[0])


def parse_tool_calls(text: str, tool_names: Collection[str] = ()) -> list[ToolCall]:
    """Every call in ``text``, in order: calls that run, and error calls that explain themselves.

    ``tool_names``: the tools the conversation offers. A call object naming one of them outside any
    ``<tool_call>`` block (``Let me look. {"name": "search", ...}``, Llama's habit) is an error call that
    shows the hermes format, not an answer. Never raises, for any string; see the module docstring.
    """
    blocks, visible = _scan(text)
    if blocks:
        return _block_calls(text, blocks)
    rest = "".join(visible)
    return _bare_calls(rest) or misplaced(json_calls_in_prose(rest, tool_names), hermes_example)


def parse_json_calls(text: str, tool_names: Collection[str] = ()) -> list[ToolCall]:
    """Llama 3's and Llama 4's calls (ms-swift's ``llama3``/``llama4`` agent templates): call JSON with
    ``"parameters"``, written after prose or ``<|python_tag|>``, one or several in a reply.

    ``<tool_call>`` blocks and a reply that is nothing but call JSON read as in :func:`parse_tool_calls`
    (but a ``<tool_call>`` inside a string of a call object that starts before it is argument text);
    otherwise every call object naming one of ``tool_names`` in the visible reply is a call (prose that
    only mentions JSON, or names no tool offered, stays an answer). ``<|python_tag|>`` with no call after
    it (Llama 3.1's built-in ``search.call(query=...)`` style) is an error call. Never raises.
    """
    blocks, visible = _scan(text)
    reply = "".join(visible)
    if blocks:
        # A <tool_call> in a string of a Llama call ({"name": "echo", "parameters": {"s": "<tool_call>"}})
        # is argument text. _scan reads it so unless a call object it cannot read comes first (it stops
        # there, to stay linear): read the reply as written from the first tag on, and keep it if a call
        # that starts before the tag reads whole across it.
        tag = blocks[0][0] - len(_OPEN)
        if "{" not in text[:tag]:  # no call object can start before the tag
            return _block_calls(text, blocks)
        before = "".join(_scan(text[:tag])[1])
        written = before + text[tag:]
        calls = _llama_calls(written, tool_names)
        if not any(c.error is None and _OPEN in c.raw and written.find(c.raw) < len(before) for c in calls):
            return _block_calls(text, blocks)
        reply = written
    else:
        calls = _llama_calls(reply, tool_names)
    tag = reply.find(_PYTHON_TAG)
    if not calls and tag >= 0:  # Llama's own start of a call: never an answer
        shown = _quote(reply[tag + len(_PYTHON_TAG) :].strip())
        message = f'after {_PYTHON_TAG} write a call as {{"name": NAME, "parameters": {{...}}}}, got: {shown}'
        calls = [ToolCall(name="", error=message, raw=reply[tag:])]
    return calls


def _llama_calls(reply: str, tool_names: Collection[str]) -> list[ToolCall]:
    """The calls of a visible reply read as Llama writes them: all call JSON, else call objects in prose."""
    rest = _unwrapped(reply)
    return _bare_calls(rest) or json_calls_in_prose(rest, tool_names)


def _unwrapped(reply: str) -> str:
    """A visible reply without Llama's ``<|python_tag|>`` before its call and end of message after it."""
    reply = reply.strip().removeprefix(_PYTHON_TAG)
    for end in _END_OF_MESSAGE:
        reply = reply.removesuffix(end)
    return reply


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
            body = _read_one(text, start.start())
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
            body = _read_one(text, start.start())
        raw = text[start.start() : body.end]
        if body.error is not None:
            calls.append(ToolCall(name=name, error=body.error, raw=raw))
            break
        calls.extend(_calls(body.values[0], raw))
        pos = body.end
    return calls


def _unescaped(name: str) -> str:
    """A name as written between quotes, its JSON escapes read (``search\\t`` is ``search`` and a tab)."""
    try:
        return json.loads(f'"{name}"') if "\\" in name else name
    except ValueError:
        return name


def misplaced(calls: list[ToolCall], example: Callable[[str], str]) -> list[ToolCall]:
    """``calls`` the model wrote in a format its prompt did not ask for, as error calls that show the
    right one: ``example(name)`` is that call written as the prompt asks."""
    out = []
    for call in calls:
        shown = call.name or "NAME"
        problem = f"{call.error}; and a" if call.error else "a"
        out.append(
            ToolCall(
                name=call.name,
                error=f"{problem} tool call must be written as {example(shown)} (this one did not run)",
                raw=call.raw,
            )
        )
    return out


def hermes_example(name: str) -> str:
    """How a call to ``name`` is written in the hermes format, on one line for an error message."""
    return f'<tool_call>{{"name": {_quote(name)}, "arguments": {{...}}}}</tool_call>'


def _read_one(text: str, pos: int) -> _Body:
    """The one JSON value that starts at ``pos``, and where it ends (``end``); text after it is not read."""
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except DuplicateKey as exc:
        return _Body(len(text), len(text), error=str(exc))
    except (ValueError, RecursionError):
        return _lex(text, pos, in_block=False, single=True)
    if _too_deep(value):
        return _Body(end, end, error=f"the JSON is nested deeper than {MAX_DEPTH} levels")
    return _Body(end, end, values=[value])


def _block_calls(text: str, blocks: list[tuple[int, _Body]]) -> list[ToolCall]:
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
            calls.extend(call for value in body.values for call in _calls(value, raw))
    return calls


@dataclass
class _Body:
    """What one block holds: its JSON ``values``, or the ``error`` that stopped reading them."""

    end: int  # where the block's text stops
    resume: int  # where the search for the next block goes on
    values: list[Any] = field(default_factory=list)
    error: str | None = None


def _scan(
    text: str, read: Callable[[str, int], _Body] | None = None
) -> tuple[list[tuple[int, _Body]], list[str]]:
    """The ``<tool_call>`` blocks outside reasoning (with where each body starts), and the text around them.

    ``read`` reads one block's body from where it starts (default: hermes JSON)."""
    read = read or _read
    pos = since = 0  # ``since``: where the calls that may hold the next tag start
    thought = False  # whether a think block was seen yet
    blocks: list[tuple[int, _Body]] = []
    visible: list[str] = []
    last_value_close = text.rfind(_PARAM_CLOSE)
    while (mark := _MARK.search(text, pos)) is not None:
        visible.append(text[pos : mark.start()])
        if mark[0] == _THINK_CLOSE and thought:  # closes nothing: text (in a call's string, say)
            visible.append(_THINK_CLOSE)
            pos = mark.end()
        elif (end := _argument_end(text, since, mark.start(), last_value_close)) is not None:  # argument text
            visible.append(text[mark.start() : end])
            pos = since = end
        elif mark[0] == _OPEN:
            body = read(text, mark.end())
            blocks.append((mark.end(), body))
            pos = since = body.resume
        elif mark[0] == _THINK_OPEN:
            close = text.find(_THINK_CLOSE, mark.end())
            if close < 0:  # never closed: the rest is reasoning
                return blocks, visible
            pos = since = close + len(_THINK_CLOSE)
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
    opened = text.rfind(_PARAM_OPEN, start, mark)  # the last XML value before the tag: still open?
    if (
        opened < 0
        or mark > last_value_close
        or _NEXT_CALL.match(text, mark)
        or not _PARAM_TAG.match(text, opened, mark)
        or text.find(_PARAM_CLOSE, opened, mark) >= 0
    ):
        return None
    close = text.find(_PARAM_CLOSE, mark)
    return None if close < 0 else close + len(_PARAM_CLOSE)


def _call_spans(text: str, pos: int, starts_before: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of the call objects that start in ``text[pos:starts_before]``, one after another,
    whatever their names, each read as :func:`json_calls_in_prose` reads one (an object may end past
    ``starts_before``); the first that cannot be read ends them."""
    while (call := _CALL_START.search(text, pos, starts_before)) is not None:
        body = _read_one(text, call.start())
        if body.error is not None:
            return
        yield call.start(), body.end
        pos = body.end


def call_arguments(text: str) -> list[tuple[int, int]]:
    """Where the calls written without tags are in a visible reply, whatever their names: ``(start, end)``
    of each call object (found and read as :func:`json_calls_in_prose` finds and reads one) and of each
    XML ``<parameter=NAME>`` value closed by its ``</parameter>`` from the first ``<function=`` on (where
    an untagged XML call can start), in order, none inside another.

    A tag in one of them is the argument's text, by the rule :func:`_argument_end` applies to think tags
    and ``<tool_call>``: rewards read ``<answer>`` so (:func:`~swift_rlfactory.rewards.rules.extract_answer`).
    The names are not needed: a tag inside a JSON string or an XML value is never the reply's own. As
    there, the first call object that cannot be read ends the search for call objects, so each character
    is read about once.
    """
    spans = list(_call_spans(text, 0, len(text)))
    pos = text.find(_FUNCTION_OPEN)
    while pos >= 0 and (value := _PARAM_TAG.search(text, pos)) is not None:
        close = text.find(_PARAM_CLOSE, value.end())
        if close < 0:
            break
        pos = close + len(_PARAM_CLOSE)
        spans.append((value.start(), pos))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):  # a JSON string may hold XML tags, and an XML value a call object
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _read(text: str, pos: int, in_block: bool = True) -> _Body:
    """Read the JSON values from ``pos`` to the end of the block (or of ``text`` when not ``in_block``)."""
    end = _naive_end(text, pos) if in_block else len(text)
    resume = end + len(_CLOSE) if text.startswith(_CLOSE, end) else end
    inside = _fenced(text, pos, end)
    try:  # the common case, valid JSON: one C call (a successful parse also proves the tag is not in a string)
        value = json.loads(
            text[inside[0] : inside[1]] if inside else text[pos:end],
            strict=False,
            parse_constant=_no_constant,
            object_pairs_hook=no_duplicates,
        )
    except DuplicateKey as exc:
        return _Body(end, resume, error=str(exc))
    except (ValueError, RecursionError):
        if inside:  # a fence ends right before the tag, so the tag is not inside a string
            return _lex(text, inside[0], in_block, stop=(inside[1], resume))
        return _lex(text, pos, in_block)
    if _too_deep(value):
        return _Body(end, resume, error=f"the JSON is nested deeper than {MAX_DEPTH} levels")
    return _Body(end, resume, values=[value])


def _lex(
    text: str, pos: int, in_block: bool, stop: tuple[int, int] | None = None, single: bool = False
) -> _Body:
    """Token by token: write each one back as strict JSON, refusing any that has no faithful JSON form.

    ``stop``: where the text to read ends and where scanning resumes, when the caller already knows.
    ``single``: read one value and end there (the text after it is someone else's).
    """
    limit = len(text) if stop is None else stop[0]
    values: list[Any] = []
    out: list[str] = []  # the value being read, as strict JSON tokens
    where: list[int] = []  # where each of them starts in ``text``
    stack: list[str] = []
    last = ""

    def ended(end: int, at: int) -> _Body:  # the body ends at ``end``, the tag (if any) is at ``at``
        token = _TOKEN.match(text, at, limit)
        resume = token.end() if token and token.lastgroup == "close" else at if stop is None else stop[1]
        if not stack:
            return _Body(end, resume, values=values)
        if last not in _COMPLETE:
            return _Body(end, resume, error=f"the JSON stops before it is complete: {_tail(text, end)}")
        out.extend(_CLOSER[opener] for opener in reversed(stack))  # closing brackets missing at the end
        where.extend([end] * len(stack))
        return _finish(text, out, where, values, end, in_block) or _Body(end, resume, values=values)

    while True:
        token = _TOKEN.match(text, pos, limit)
        kind = token.lastgroup if token is not None else None
        if in_block and kind in ("close", "open") or token is None and pos >= limit:
            return ended(pos, pos)
        if token is None or kind in ("close", "open"):
            if text[pos] in "\"'":
                return _fail(text, pos, in_block, f"a string is never closed: {_near(text, pos)}")
            return _fail(text, pos, in_block, _stray(text, pos, bool(stack), bool(values)))
        tok = token.group()
        if kind in ("space", "comment"):
            pos = token.end()
            continue
        if not stack:  # between values: only separators, fences and extra closing brackets
            if kind == "fence" or tok in (",", "}", "]"):
                pos = token.end()
                continue
            if tok not in _CLOSER:
                return _fail(text, pos, in_block, _stray(text, pos, False, bool(values)))
        if tok in _CLOSER:
            if len(stack) >= MAX_DEPTH:
                return _fail(text, pos, in_block, f"the JSON is nested deeper than {MAX_DEPTH} levels")
            stack.append(tok)
        elif tok in ("}", "]"):
            if _CLOSER[stack[-1]] != tok:
                return _fail(text, pos, in_block, f"{tok!r} does not close {stack[-1]!r}: {_near(text, pos)}")
            stack.pop()
            if out[-1] == ",":  # a trailing comma
                out.pop()
                where.pop()
        elif kind == "fence":  # fine as the last thing in the block: it closes a fence around the JSON
            after = _SPACE.match(text, token.end(), limit).end()
            if after >= limit or in_block and text.startswith((_CLOSE, _OPEN), after):
                return ended(pos, after)
            return _fail(text, pos, in_block, f"a code fence inside the JSON: {_near(text, pos)}")
        out.append(_strict(kind, tok))
        where.append(pos)
        last = "string" if kind in ("string", "quoted") else "literal" if kind == "literal" else tok
        pos = token.end()
        if not stack:
            failed = _finish(text, out, where, values, pos, in_block)
            if failed is not None:
                return failed
            if single:
                return _Body(pos, pos, values=values)
            out, where = [], []


def _no_constant(name: str) -> Any:
    """``json.loads``'s hook for ``NaN`` and ``Infinity``, which Python reads and strict JSON does not."""
    raise ValueError(f"{name} is not JSON")


# :func:`_read_one`'s reader, made once: it reads a candidate object at every "{" of a reply's prose
_DECODER = json.JSONDecoder(strict=False, parse_constant=_no_constant, object_pairs_hook=no_duplicates)


def _strict(kind: str | None, tok: str) -> str:
    """One token as strict JSON, meaning unchanged."""
    if kind == "string":
        return _ESCAPE.sub(_keep_escape, tok[1:-1]).join('""') if "\\" in tok else tok
    if kind == "quoted":
        return _ESCAPE.sub(_keep_escape, tok[1:-1]).join('""')
    if kind == "literal":
        return _PYTHON_LITERALS.get(tok, tok)
    return tok


def _keep_escape(match: re.Match[str]) -> str:
    """Inside a string: a bare ``"`` becomes ``\\"``, ``\\'`` becomes ``'``, and an escape JSON does not
    know keeps its backslash as text (``\\d`` stays a backslash and a ``d``)."""
    escaped = match[1]
    if escaped is None:
        return '\\"'
    if escaped == "'":
        return "'"
    if escaped in _JSON_ESCAPES or len(escaped) == 5:
        return match[0]
    return "\\\\" + escaped


def _finish(
    text: str, out: list[str], where: list[int], values: list[Any], pos: int, in_block: bool
) -> _Body | None:
    """Parse one re-written value into ``values``; the failed block when even strict JSON cannot read it."""
    strict = "".join(out)
    try:
        values.append(json.loads(strict, strict=False, object_pairs_hook=no_duplicates))
    except DuplicateKey as exc:
        return _fail(text, pos, in_block, str(exc))
    except json.JSONDecodeError as exc:
        index, offset = 0, len(out[0])
        while index + 1 < len(out) and offset <= exc.pos:  # the token the error points at
            index += 1
            offset += len(out[index])
        return _fail(text, pos, in_block, f"not valid JSON ({exc.msg}): {_near(text, where[index])}")
    except ValueError:  # Python's own limit: an integer of more than 4300 digits
        return _fail(text, pos, in_block, "a number too long to read (more than 4300 digits)")
    return None


def _fail(text: str, pos: int, in_block: bool, message: str) -> _Body:
    """A block that could not be read: it ends at the next tag from ``pos`` (strings cannot be trusted now)."""
    end = _naive_end(text, pos) if in_block else len(text)
    resume = end + len(_CLOSE) if text.startswith(_CLOSE, end) else end
    return _Body(end, resume, error=message)


def _naive_end(text: str, pos: int) -> int:
    """The next ``</tool_call>`` or ``<tool_call>`` from ``pos``, taken literally, or the end of ``text``."""
    end = text.find(_OPEN, pos)
    end = len(text) if end < 0 else end
    close = text.find(_CLOSE, pos, end)  # bounded by the next opening tag: many blocks stay linear
    return end if close < 0 else close


def _stray(text: str, pos: int, inside: bool, after: bool) -> str:
    """Why the text at ``pos`` cannot be read, in words the model can act on."""
    if inside:
        return f"not valid JSON, expected a value, key or bracket: {_near(text, pos)}"
    if after:
        return f"unexpected text after the JSON: {_near(text, pos)}"
    return f"tool call is not a JSON object: {_near(text, pos)}"


def _fenced(text: str, pos: int, end: int) -> tuple[int, int] | None:
    """Where the text inside a code fence is, when one wraps ``text[pos:end]`` (string methods, not a
    backtracking regex: a fence followed by a megabyte of spaces stays linear)."""
    start = end - len(text[pos:end].lstrip())
    stop = pos + len(text[pos:end].rstrip())
    if not (text.startswith("```", start, end) and text.endswith("```", start, stop)):
        return None
    opened = _FENCE.match(text, start, stop).end()
    return (opened, stop - 3) if opened <= stop - 3 else None


def _bare_calls(text: str) -> list[ToolCall]:
    """The calls in a reply that is nothing but call JSON, else none: all of them valid, or it is no call."""
    inside = _fenced(text, 0, len(text))
    body = (text[inside[0] : inside[1]] if inside else text).strip()
    if not body.startswith(("{", "[")):
        return []
    decoder = json.JSONDecoder(parse_constant=_no_constant, object_pairs_hook=no_duplicates)
    values, pos = [], 0
    try:
        while pos < len(body):  # values one after another, only white space between them
            value, pos = decoder.raw_decode(body, pos)
            values.append(value)
            pos = _SPACE.match(body, pos).end()
    except (ValueError, RecursionError):
        return []
    if any(_too_deep(value) or value == [] for value in values):
        return []
    calls = [call for value in values for call in _calls(value, text, bare=True)]
    return calls if all(call.error is None for call in calls) else []


def _calls(value: Any, raw: str, bare: bool = False) -> list[ToolCall]:
    """The calls in one JSON value: a call object, or an array of them."""
    if isinstance(value, list):
        if not value:
            return [ToolCall(name="", error="an empty list of tool calls", raw=raw)]
        return [_call(item, raw, bare) for item in value]
    return [_call(value, raw, bare)]


def _call(obj: Any, raw: str, bare: bool) -> ToolCall:
    """One call object as a :class:`ToolCall`, or an error call saying what is wrong with it."""

    def error(message: str) -> ToolCall:
        shown = _clean(name)[:_MAX_NAME] if isinstance(name, str) else ""
        return ToolCall(name=shown, error=message, raw=raw)

    name = None
    if not isinstance(obj, dict):
        return error(f"tool call is not a JSON object: {_quote(json.dumps(obj, ensure_ascii=False))}")
    if (
        isinstance(obj.get("function"), dict) and "name" not in obj
    ):  # OpenAI: {"type": "function", "function": {...}}
        unknown = sorted(obj.keys() - {"function"} - _METADATA)
        if unknown:
            return error(f'unexpected key {_quote(unknown[0])} next to "function"')
        obj = obj["function"]
    name = obj.get("name")
    if name is None:
        return error(f'tool call has no "name": {_quote(json.dumps(obj, ensure_ascii=False))}')
    if not isinstance(name, str) or not name.strip():
        return error(
            f'"name" must be a non-empty string, got: {_quote(json.dumps(name, ensure_ascii=False))}'
        )
    name = name.strip()  # " search " is the tool search; no tool name has outer white space
    if len(name) > _MAX_NAME:
        return error(f'"name" is {len(name)} characters long, more than any tool name: {_quote(name)}')
    given = [key for key in ("arguments", "parameters") if key in obj]
    if len(given) == 2:
        return error('give "arguments" or "parameters", not both')
    unknown = sorted(obj.keys() - {"name", "arguments", "parameters"} - _METADATA)
    if unknown:
        return error(f'unexpected key {_quote(unknown[0])} in the call: arguments go inside "arguments"')
    if bare and not given:
        return error('no "arguments"')
    key = given[0] if given else "arguments"
    arguments = obj.get(key)
    # OpenAI style: the object as a JSON string, or a string of that string (dumped twice). Each encoding
    # doubles the escapes, so a text holds only a few of them and this loop stays linear.
    while isinstance(arguments, str):
        if not arguments.strip():
            arguments = None
            break
        read = _read(arguments, 0, in_block=False)
        if read.error is not None and read.error.endswith(DuplicateKey.SAYS):
            return error(f'"{key}": {read.error}')
        if read.error is not None or len(read.values) != 1:
            return error(f'"{key}" is a string that is not one JSON object: {_quote(arguments)}')
        arguments = read.values[0]
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        shown = json.dumps(arguments, ensure_ascii=False)
        return error(f'"{key}" must be a JSON object, got: {_quote(shown)}')
    out_of_range = _non_finite(arguments)
    if out_of_range is not None:
        return error(
            f"argument {_quote(out_of_range)} is out of range: a number this large reads as infinity, "
            "which no JSON transport can carry"
        )
    surrogate = _SURROGATE.search(name + json.dumps(arguments, ensure_ascii=False))
    if surrogate is not None:
        return error(
            f"lone surrogate \\u{ord(surrogate[0]):04x} in the call: write the character itself, "
            "or both halves of its surrogate pair"
        )
    return ToolCall(name=name, arguments=arguments, raw=raw)


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests objects and arrays deeper than :data:`MAX_DEPTH` (without recursing)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


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


def _near(text: str, pos: int) -> str:
    """The model's text from just before ``pos``, quoted for an error message."""
    return _quote(text[max(0, pos - 20) : pos + _EXCERPT - 20])


def _tail(text: str, end: int) -> str:
    """The last few characters before ``end`` (trailing space aside), quoted."""
    return _quote(text[max(0, end - 4 * _EXCERPT) : end].rstrip()[-_EXCERPT:])


def _quote(text: str) -> str:
    """``text`` as a short, one-line quotation that any transport can carry."""
    if len(text) > _EXCERPT:
        text = text[: _EXCERPT - 3] + "..."
    return json.dumps(_clean(text), ensure_ascii=False)


def _clean(text: str) -> str:
    """``text`` with lone surrogates written as escapes, so it encodes as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
