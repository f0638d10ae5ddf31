"""Read Qwen3-Coder's and Qwen3.5's XML tool calls: what ms-swift's ``qwen3_coder`` and ``qwen3_5`` agent
templates tell the model to write, inside the same ``<tool_call>`` tags as hermes::

    <tool_call>
    <function=search>
    <parameter=query>
    capital of France
    </parameter>
    <parameter=top_k>
    3
    </parameter>
    </function>
    </tool_call>

:func:`parse_xml_tool_calls` never raises; a call it cannot read is an error :class:`~.parsing.ToolCall`
that says why, as on the hermes path, and the same reasoning rules apply (calls inside ``<think>`` do not
run). Every call that reads goes through the hermes path's checks of a call object (name, nesting,
numbers out of range, lone surrogates).

Values are raw text, not JSON
    A value is the text between ``<parameter=NAME>`` and the first ``</parameter>``, less one newline
    right after the opening tag and one right before the closing tag (the layout the template renders,
    as vLLM's ``qwen3_coder`` parser reads it; ``\r\n`` both, when the first is one): other white
    space, ``<``, ``>``, quotes and JSON-looking text are the value. Its type comes from the tool's schema, by ms-swift's rule for schema-typed XML
    calls (``xing4_0``, ``minicpm5``): when the types the parameter's schema allows leave out ``"string"``
    and the text is JSON, the value is that JSON (``3``, ``true``, ``[1, 2]``); otherwise it stays text,
    which the tool's own argument check then judges (``"three"`` for an integer). The types allowed are
    its ``type``, the types of its ``enum`` or ``const`` values, the union of its ``anyOf``/``oneOf``
    branches and what every ``allOf`` branch allows; a schema that says none (``{}``) allows strings.
    ``null`` is ``None`` for a parameter that may be a string or null. Text that is not JSON but written
    Python's way (``{'a': True}``, ``['x', None]``, ``None``) is read by the hermes path's repair (single
    quotes, Python literals, trailing commas, a code fence: nothing that changes a value) and typed when
    what it reads is of a type the schema takes (``'abc'`` for an object stays ``'abc'``). A parameter
    the schema does not name stays text (vLLM's rule: the model wrote text). A type given by a local
    ``$ref`` is the type it points at, however it is wrapped: ``{"$ref": "#/$defs/Where"}`` (pydantic 2.9+, FastMCP),
    ``{"allOf": [{"$ref": ...}], "description": ...}`` (pydantic before 2.9, for a model field with a
    description or default), ``anyOf`` with ``{"type": "null"}`` (an optional model), ``oneOf`` (a
    discriminated union), draft-07's ``#/definitions/...`` and references into other places of the
    schema (zod-to-json-schema, whose ``#`` is the whole parameters schema), references to references.
    One that leads back to itself, points nowhere or outside the schema gives no type.

What is refused
    A block without ``<function=NAME>``; a parameter never closed with ``</parameter>`` (its value would
    run into the next call), which a ``<tool_call><function=...>`` before its ``</parameter>`` shows (a
    ``<tool_call>`` alone is the value's text, as in code that prints it); a parameter written twice (one
    value would be lost); text outside the tags of a call, which would be thrown away. ``</function>``
    may be missing at the end of a block and ``</tool_call>`` at the end of the text (generation stops
    there). One block may hold several functions. Without any block, ``<function=...>`` calls are those
    calls, as vLLM falls back to: at the start of the reply, or after prose when the function is an
    offered tool (text after them is refused). JSON naming an offered tool (``{"name": "search", ...}``,
    anywhere in the reply) is an error call showing this format, so the model learns it instead of
    ending on an "answer".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .parsing import (
    _CLOSE,
    _NEXT_CALL,
    _OPEN,
    _PARAM_CLOSE,
    _PYTHON_LITERALS,
    MAX_DEPTH,
    DuplicateKey,
    ToolCall,
    _block_calls,
    _Body,
    _naive_end,
    _near,
    _no_constant,
    _quote,
    _read,
    _scan,
    _too_deep,
    json_calls_in_prose,
    misplaced,
    no_duplicates,
)

_FUNCTION = re.compile(r"\s*<function=([^>\n]*)>")
_FUNCTION_TAG = re.compile(r"<function=([^>\n]*)>")
_PARAMETER = re.compile(r"\s*<parameter=([^>\n]*)>")
_FUNCTION_END = re.compile(r"\s*</function>")
BARE_XML_CALL = "<function="
"""How a reply that is nothing but XML calls, without ``<tool_call>`` tags, starts."""
_SPACE = re.compile(r"\s*")
_COMBINATORS = ("allOf", "anyOf", "oneOf")
_TOO_DEEP = "the JSON is nested deeper than"
_JSON_TYPES = (
    (bool, "boolean"),  # before int: a bool is an int in Python
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)

Properties = Mapping[str, Mapping[str, Any]]


def schema_properties(tools: Sequence[Mapping[str, Any]] | None) -> dict[str, Properties]:
    """Each tool's parameter schemas by tool name, from OpenAI-style tool schemas (wrapped or not).

    ``tools`` comes from a dataset row, so anything may stand there: what is not a list of schemas gives
    no types (values stay text), and ``parameters`` written as a JSON string is read, as ms-swift reads it.
    """
    out: dict[str, Properties] = {}
    for tool in tools if isinstance(tools, Sequence) and not isinstance(tools, str | bytes) else []:
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
        name, parameters = function.get("name"), function.get("parameters")
        if isinstance(parameters, str):
            try:
                parameters = json.loads(parameters)
            except ValueError:
                parameters = None
        if isinstance(name, str):  # a tool without parameters is still a tool the model may call
            properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
            if not isinstance(properties, Mapping):
                out[name] = {}
                continue
            memo: dict[str, Any] = {}
            out[name] = {key: _dereferenced(schema, parameters, memo) for key, schema in properties.items()}
    return out


def _dereferenced(schema: Any, root: Mapping[str, Any], memo: dict[str, Any], depth: int = 0) -> Any:
    """``schema`` with the local ``$ref`` that gives its type, and those of its ``allOf``/``anyOf``/``oneOf``
    branches, replaced by the schema they point at in ``root`` (``#/$defs/Where``, ``#/definitions/Where``).

    A reference with keywords beside it (``{"$ref": ..., "description": ...}``) is read as JSON Schema
    2020-12 reads it: one more ``allOf`` branch, so both the target and those keywords apply. A
    reference that is not local, points nowhere or leads back to itself (a recursive model) stays as
    written, so its type stays unknown. ``memo`` holds each reference of ``root`` once followed (``None``
    while it is being followed), so every definition is read once however many parameters use it.
    Past :data:`MAX_DEPTH` references and branches deep (a hostile server's chain of ten thousand) the
    schema is ``{}``: any type, so its values stay text.
    """
    if not isinstance(schema, Mapping):
        return schema
    if depth > MAX_DEPTH:
        return {}
    out = dict(schema)
    for key in _COMBINATORS:
        if isinstance(schema.get(key), list):
            out[key] = [_dereferenced(branch, root, memo, depth + 1) for branch in schema[key]]
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if ref not in memo:
            memo[ref] = None
            memo[ref] = _dereferenced(_pointed(root, ref), root, memo, depth + 1)
        target = memo[ref]
        if isinstance(target, Mapping):
            del out["$ref"]
            out["allOf"] = [*(out["allOf"] if isinstance(out.get("allOf"), list) else []), target]
    return out


def _pointed(root: Mapping[str, Any], ref: str) -> Any:
    """What the JSON pointer of a local reference (``#/$defs/Where``) names in ``root``, or ``None``.
    ``#`` is ``root`` itself: zod-to-json-schema's reference to a recursive root schema (a tree whose
    children are trees), which is the tool's parameters, an object."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def parse_xml_tool_calls(
    text: str, tools: Sequence[Mapping[str, Any]] | None = None, *, properties: dict | None = None
) -> list[ToolCall]:
    """Every XML call in ``text``, in order, values typed by ``tools`` (OpenAI-style schemas).

    ``properties`` is :func:`schema_properties` of the tools, when the caller has it already. A JSON call
    object naming one of the tools outside any block (hermes or Llama style) is an error call that shows
    the XML format, not an answer. Never raises.
    """
    properties = schema_properties(tools) if properties is None else properties

    def read(body_text: str, pos: int) -> _Body:
        return _read_xml(body_text, pos, properties)

    blocks, visible = _scan(text, read)
    if not blocks:
        rest = "".join(visible)
        start = _untagged_start(rest, properties)
        if start is None:
            return misplaced(json_calls_in_prose(rest, properties.keys()), xml_example)
        blocks = [(start, _read_xml(rest, start, properties, in_block=False))]
        text = rest
    return _block_calls(text, blocks)


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


def _read_xml(text: str, pos: int, properties: dict[str, Properties], in_block: bool = True) -> _Body:
    """The call objects of one block's ``<function=...>`` elements, or the error that stopped reading."""
    values: list[Any] = []

    def failed(message: str) -> _Body:  # a broken block ends at the next tag taken literally
        stop = _naive_end(text, at) if in_block else len(text)
        resume = stop + len(_CLOSE) if text.startswith(_CLOSE, stop) else stop
        return _Body(stop, resume, error=message)

    at = pos
    limit = -1  # in a block, values close before the next call's ``<tool_call><function=``: where it starts
    while True:
        after = _SPACE.match(text, at).end()
        if after >= len(text) or in_block and text.startswith((_CLOSE, _OPEN), after):
            resume = after + len(_CLOSE) if text.startswith(_CLOSE, after) else after
            return _Body(after, resume, values=values)
        function = _FUNCTION.match(text, at)
        if function is None:
            if values:
                return failed(f"unexpected text after </function>: {_near(text, after)}")
            return failed(f"expected <function=NAME> inside <tool_call>: {_near(text, after)}")
        name = function[1].strip()
        at = function.end()
        arguments: dict[str, Any] = {}
        while (parameter := _PARAMETER.match(text, at)) is not None:
            key = parameter[1].strip()
            if limit < parameter.end():  # looked for once per block (it is the next block's start)
                following = _NEXT_CALL.search(text, parameter.end()) if in_block else None
                limit = len(text) if following is None else following.start()
            close = text.find(_PARAM_CLOSE, parameter.end(), limit)
            if close < 0:
                return failed(f"parameter {_quote(key)} is never closed with </parameter>")
            if key in arguments:
                return failed(f"parameter {_quote(key)} is written twice")
            value = _unframed(text[parameter.end() : close])
            try:
                arguments[key] = _typed(value, properties.get(name, {}).get(key))
            except _Unreadable as exc:
                return failed(f"parameter {_quote(key)}: {exc}")
            at = close + len(_PARAM_CLOSE)
        values.append({"name": name, "arguments": arguments})
        closed = _FUNCTION_END.match(text, at)
        if closed is not None:
            at = closed.end()
            continue
        after = _SPACE.match(text, at).end()
        if after < len(text) and not (in_block and text.startswith((_CLOSE, _OPEN), after)):
            return failed(f"unexpected text in <function={name}>: {_near(text, after)}")
        at = after  # </function> missing at the end of the block: nothing of the call is lost


def _unframed(value: str) -> str:
    """A parameter's text less the layout's newline after the opening tag and before the closing one.
    The first says how the layout is written: ``\r\n`` there makes the last ``\r\n`` layout too, while
    after ``\n`` a value ending in ``\r`` keeps it."""
    newline = "\r\n" if value.startswith("\r\n") else "\n"
    return value.removeprefix(newline).removesuffix(newline)


def _typed(value: str, schema: Any) -> Any:
    """``value`` as the JSON it spells when ``schema``'s type leaves out strings, else the text itself."""
    types = _types(schema)
    if not types:
        return value
    if "string" in types:
        return None if "null" in types and value.strip() == "null" else value
    try:
        typed = json.loads(value, parse_constant=_no_constant, object_pairs_hook=no_duplicates)
    except DuplicateKey as exc:
        raise _Unreadable(str(exc)) from None
    except (ValueError, RecursionError):
        return _repaired(value, types)
    if _too_deep(typed):
        raise _Unreadable(f"{_TOO_DEEP} {MAX_DEPTH} levels")
    return typed


def _repaired(value: str, types: set[str]) -> Any:
    """``value`` written Python's way (``{'a': True}``, ``['x', None]``, ``None``) read by the hermes path's
    faithful repair, when what it reads is of a type the schema takes; else the text itself.

    A string is never such a type here (the caller keeps the text of a parameter that may be one), so
    ``'abc'`` stays ``'abc'`` rather than losing its quotes. What the repair refuses (unquoted words,
    tuples, text after the value) stays text too; a repeated key or nesting past :data:`MAX_DEPTH` is an
    error, as in strict JSON, since reading it would drop or refuse a value.
    """
    literal = _PYTHON_LITERALS.get(value.strip())
    if literal is not None:  # the reader below reads objects and arrays; a bare True is one token
        read = _Body(len(value), len(value), values=[json.loads(literal)])
    else:
        read = _read(value, 0, in_block=False)
    if read.error is not None:
        if read.error.endswith(DuplicateKey.SAYS) or read.error.startswith(_TOO_DEEP):
            raise _Unreadable(read.error)
        return value
    if len(read.values) != 1 or not _allows(types, read.values[0]):
        return value
    return read.values[0]


def _allows(types: set[str], value: Any) -> bool:
    """Whether a schema that allows ``types`` takes ``value`` as far as its JSON type goes."""
    kind = _json_type(value)
    return kind in types or kind == "integer" and "number" in types


class _Unreadable(ValueError):
    """A parameter value that is JSON the call cannot carry (a repeated key, too deep)."""


def _types(schema: Any) -> set[str]:
    """The JSON types ``schema`` allows: its ``type`` (a name or a list), the types of its ``enum`` or
    ``const`` values, the union of its ``anyOf``/``oneOf`` branches and what every ``allOf`` branch allows.
    Empty when it does not say, or when no type meets all of them (values stay text then).
    """
    if not isinstance(schema, Mapping):
        return set()
    found: list[set[str]] = []  # each holds: the schema allows the types that all of them allow
    declared = schema.get("type")
    if isinstance(declared, str):
        found.append({declared})
    elif isinstance(declared, list):
        found.append({t for t in declared if isinstance(t, str)})
    values = schema.get("enum") if isinstance(schema.get("enum"), list) else None
    if values is None and "const" in schema:
        values = [schema["const"]]
    if values is not None:
        found.append({_json_type(value) for value in values})
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            union: set[str] = set()
            for branch in schema[key]:
                branch_types = _types(branch)
                if not branch_types:  # a branch of any type: it could be a string
                    union = {"string"}
                    break
                union |= branch_types
            found.append(union)
    for branch in schema.get("allOf") if isinstance(schema.get("allOf"), list) else []:
        branch_types = _types(branch)
        if branch_types:  # a branch that says nothing of the type ({"description": ...}) narrows nothing
            found.append(branch_types)
    if not found:
        return set()
    allowed = found[0]
    for more in found[1:]:
        # an integer is a number: {"type": "number"} and {"type": "integer"} together allow integers
        integer = "integer" in allowed and "number" in more or "number" in allowed and "integer" in more
        allowed = (allowed & more) | ({"integer"} if integer else set())
    return allowed


def _json_type(value: Any) -> str:
    """The JSON Schema type name of a JSON value (``True`` is a boolean, not an integer)."""
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), "null")
