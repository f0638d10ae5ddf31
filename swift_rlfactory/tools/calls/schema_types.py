"""A tool's parameter schemas, and an XML call's value typed by its parameter's schema (ms-swift's rule for
schema-typed XML calls; the rules: docs/tool-calls.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .call import MAX_DEPTH, Body, DuplicateKey, no_constant, no_duplicates, too_deep
from .json_reader import PYTHON_LITERALS, read_block

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


def typed(value: str, schema: Any) -> Any:
    """``value`` as the JSON it spells when ``schema``'s type leaves out strings, else the text itself."""
    types = _types(schema)
    if not types:
        return value
    if "string" in types:
        return None if "null" in types and value.strip() == "null" else value
    try:
        typed = json.loads(value, parse_constant=no_constant, object_pairs_hook=no_duplicates)
    except DuplicateKey as exc:
        raise Unreadable(str(exc)) from None
    except (ValueError, RecursionError):
        return _repaired(value, types)
    if too_deep(typed):
        raise Unreadable(f"{_TOO_DEEP} {MAX_DEPTH} levels")
    return typed


def _repaired(value: str, types: set[str]) -> Any:
    """``value`` written Python's way (``{'a': True}``, ``['x', None]``, ``None``) read by the hermes path's
    faithful repair, when what it reads is of a type the schema takes; else the text itself.

    A string is never such a type here (the caller keeps the text of a parameter that may be one), so
    ``'abc'`` stays ``'abc'`` rather than losing its quotes. What the repair refuses (unquoted words,
    tuples, text after the value) stays text too; a repeated key or nesting past :data:`MAX_DEPTH` is an
    error, as in strict JSON, since reading it would drop or refuse a value.
    """
    literal = PYTHON_LITERALS.get(value.strip())
    if literal is not None:  # the reader below reads objects and arrays; a bare True is one token
        read = Body(len(value), len(value), values=[json.loads(literal)])
    else:
        read = read_block(value, 0, in_block=False)
    if read.error is not None:
        if read.error.endswith(DuplicateKey.SAYS) or read.error.startswith(_TOO_DEEP):
            raise Unreadable(read.error)
        return value
    if len(read.values) != 1 or not _allows(types, read.values[0]):
        return value
    return read.values[0]


def _allows(types: set[str], value: Any) -> bool:
    """Whether a schema that allows ``types`` takes ``value`` as far as its JSON type goes."""
    kind = _json_type(value)
    return kind in types or kind == "integer" and "number" in types


class Unreadable(ValueError):
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
