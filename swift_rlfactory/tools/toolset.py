"""A set of tool providers started together, with one namespace of unique, valid tool names.

How clashing and invalid names are renamed and long descriptions cut: docs/tools.md ("The tool set").
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from .base import ChangingToolProvider, Tool, ToolProvider, ToolSpec
from .observation import encodable

logger = logging.getLogger(__name__)

MAX_NAME = 64
_NOT_IN_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def function_name(name: str, suffix: str = "") -> str:
    """``name`` + ``suffix`` as a valid function name: ``[a-zA-Z0-9_-]``, 1 to :data:`MAX_NAME` characters.

    Other characters become ``_``; a name too long keeps its start and ends with 8 hex digits of a hash of
    the whole (``suffix`` included), so two long names that share their start stay apart, and the same name
    always maps to the same result.
    """
    clean = _NOT_IN_NAME.sub("_", name) or "tool"
    if len(clean) + len(suffix) <= MAX_NAME:
        return clean + suffix
    digest = hashlib.sha1((name + suffix).encode()).hexdigest()[:8]
    return f"{clean[: MAX_NAME - len(suffix) - 9]}_{digest}{suffix}"


# Keywords whose values are schemas (a mapping of them, a list of them, or one), so that a "description"
# is cut where it is prose and never where it is data: a parameter named "description", a default.
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalItems", "additionalProperties", "not", "if", "then", "else", "contains",
               "propertyNames", "unevaluatedItems", "unevaluatedProperties")  # fmt: skip


def capped_spec(spec: ToolSpec, limit: int | None) -> tuple[ToolSpec, list[str]]:
    """``spec`` with its description and each description in its parameter schema cut to ``limit``
    characters (``None``: not cut) and defused as a tool result is, and where the cuts were
    (``"description"``, ``"properties/q"``); ``spec`` itself when nothing changes.

    A cut description ends with `` [description cut: N characters, the first K shown]``, so the model
    (and whoever reads the prompt) knows there was more. Defused (:func:`~.observation.encodable`): a
    server's description that spells ``<|im_end|>`` would end the system prompt it is rendered into. The
    schema is walked by its keywords, so a default, an enum or a parameter named ``description`` is never
    taken for prose, and it is copied before it is changed: the server's own schema is left as it was.
    """
    description = _fitted(spec.description, limit)
    cuts = ["description"] if limit is not None and len(spec.description) > limit else []
    parameters = spec.parameters
    if any(
        _fitted(node["description"], limit) != node["description"] for node, _ in _descriptions(parameters)
    ):
        parameters = json.loads(json.dumps(parameters))
        for node, where in _descriptions(parameters):
            if limit is not None and len(node["description"]) > limit:
                cuts.append(where)
            node["description"] = _fitted(node["description"], limit)
    if description == spec.description and parameters is spec.parameters:
        return spec, []
    return replace(spec, description=description, parameters=parameters), cuts


def _fitted(text: str, limit: int | None) -> str:
    """``text`` as the prompt shows it: cut to ``limit`` (:func:`_cut`), defused."""
    return encodable(text if limit is None else _cut(text, limit))


def _cut(text: str, limit: int) -> str:
    """``text`` as its first ``limit`` characters and a note saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [description cut: {len(text)} characters, the first {limit} shown]"


def _descriptions(schema: Any) -> Iterator[tuple[dict[str, Any], str]]:
    """Every schema in ``schema`` (itself included) with a ``description`` text, with where it is
    (``"properties/q/items"``; ``"parameters"`` for ``schema`` itself)."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        node, where = stack.pop()
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("description"), str):
            yield node, where or "parameters"
        inside = f"{where}/" if where else ""
        for key in _SCHEMA_MAPS:
            if isinstance(node.get(key), dict):
                stack.extend((child, f"{inside}{key}/{name}") for name, child in node[key].items())
        for key in (*_SCHEMA_LISTS, *_SCHEMA_ONE):
            value = node.get(key)
            if isinstance(value, list):  # also draft-07's items as a list, one schema per position
                stack.extend((child, f"{inside}{key}/{i}") for i, child in enumerate(value))
            else:
                stack.append((value, f"{inside}{key}"))


class DescriptionCap:
    """Cuts tool descriptions to ``limit`` characters, with one warning per tool however often it is cut:
    a :class:`ToolSet`'s tools (:meth:`spec`), and OpenAI tool schemas that come from outside one (a
    dataset row's own ``tools`` column, which the eval renders instead of the environment's tools,
    :meth:`schemas`). ``None``: no cap."""

    def __init__(self, limit: int | None):
        self.limit = limit
        self._warned: set[tuple[str, str]] = set()

    def schemas(self, schemas: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
        """``schemas`` (``{"type": "function", "function": {...}}`` or the bare function) with their
        descriptions cut; ``source`` names where they came from in the warning. Entries of another shape
        are left as they are (the template renders them, or refuses them, as given)."""
        return [self._capped(schema, source) for schema in schemas]

    def spec(self, spec: ToolSpec, source: str) -> ToolSpec:
        """``spec`` with its descriptions cut (:func:`capped_spec`), ``spec`` itself when none is too long;
        the first cut of each tool of ``source`` is warned about."""
        capped, cuts = capped_spec(spec, self.limit)
        if cuts and (spec.name, source) not in self._warned:
            self._warned.add((spec.name, source))
            logger.warning(
                "tool %r of %s: cut to limits.max_description_chars (%d characters): %s; every description "
                "is in the system prompt of every trajectory",
                spec.name, source, self.limit, _described(spec, cuts),
            )  # fmt: skip
        return capped

    def _capped(self, schema: dict[str, Any], source: str) -> dict[str, Any]:
        function = schema.get("function", schema) if isinstance(schema, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("description", ""), str):
            return schema
        parameters = function.get("parameters")
        spec = ToolSpec(str(function.get("name", "")), function.get("description", ""),
                        parameters if isinstance(parameters, dict) else {})  # fmt: skip
        capped = self.spec(spec, source)
        if capped is spec:
            return schema
        function = {**function, "description": capped.description}
        if isinstance(parameters, dict):
            function["parameters"] = capped.parameters
        return {**schema, "function": function} if "function" in schema else function


class RenamedTool:
    """A tool exposed under another public name, or with its descriptions cut; calls (and its own
    ``timeout_s``) go to the original."""

    def __init__(self, inner: Tool, name: str, description: str | None = None, spec: ToolSpec | None = None):
        self.inner = inner
        self.spec: ToolSpec = spec or inner.spec.renamed(name, description)

    @property
    def timeout_s(self) -> float | None:
        """The wrapped tool's own timeout, if it has one."""
        return getattr(self.inner, "timeout_s", None)

    async def call(self, arguments: dict[str, Any]) -> Any:
        """Forward to the wrapped tool."""
        return await self.inner.call(arguments)


class PythonProvider:
    """Provider for in-process :class:`~.python_tool.PythonTool` objects (nothing to start or stop)."""

    def __init__(self, tools: Sequence[Tool], name: str = "python"):
        self.name = name
        self._tools = list(tools)

    async def start(self) -> list[Tool]:
        """The tools, as given."""
        return list(self._tools)

    async def close(self) -> None:
        """Nothing to release."""


class ToolSet:
    """Starts providers concurrently and merges their tools under unique names.

    ``max_description_chars``: the longest description (a tool's, or one in its parameter schema) the
    model is shown; longer ones are cut with a note, and a warning names the tool. ``None``: no cap.
    """

    def __init__(self, providers: Sequence[ToolProvider], max_description_chars: int | None = None):
        self.providers = list(providers)
        self._cap = DescriptionCap(max_description_chars)
        self.tools: dict[str, Tool] = {}
        self.late: dict[str, Tool] = {}
        """Tools found by :meth:`late_tool`, by the name the model called them by."""

    async def start(self) -> None:
        """Start all providers; if any fails, close those already started and re-raise."""
        results = await asyncio.gather(*(p.start() for p in self.providers), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            await self.close()
            raise failures[0]
        try:
            self.tools = self._merge(results)
        except BaseException:
            await self.close()
            raise

    async def late_tool(self, name: str) -> Tool | None:
        """The tool ``name`` that no provider offered at start but one offers now (``None``: none does).

        The model is shown :attr:`tools` only, but a server may add a tool during the run (an MCP server
        that enables one and sends ``notifications/tools/list_changed``), and a tool or the server's own
        text may tell the model about it. The first provider in order that offers ``name`` serves it from
        then on, even after it stops offering it (its calls then fail saying so), so one name never moves
        between servers mid-run. A name in :attr:`tools` is never looked up here.
        """
        if name in self.late:
            return self.late[name]
        for provider in self.providers:
            tool = await provider.late_tool(name) if isinstance(provider, ChangingToolProvider) else None
            if tool is not None:
                logger.info("tool %r, offered by %r since start-up, is called", name, provider.name)
                self.late[name] = tool
                return tool
        return None

    def _merge(self, results: Sequence[list[Tool]]) -> dict[str, Tool]:
        counts = Counter(tool.spec.name for tools in results for tool in tools)
        own = counts.keys()  # a rename never takes one of these
        clashing = {name for name, n in counts.items() if n > 1}
        merged: dict[str, Tool] = {}
        for provider, tools in zip(self.providers, results, strict=True):
            prefix = getattr(provider, "name", type(provider).__name__)
            for tool in tools:
                name = tool.spec.name
                public = function_name(name)
                if public in merged or (public != name and public in own):
                    public, n = function_name(f"{prefix}_{name}"), 2
                    while public in merged or public in own:
                        public, n = function_name(f"{prefix}_{name}", f"_{n}"), n + 1
                description = None
                if name in clashing:  # say which server, or the model sees two tools it cannot tell apart
                    description = f"{tool.spec.description} (server {prefix!r}, tool {name!r})".lstrip()
                if public != name:
                    logger.info("tool %r of %r is offered to the model as %r", name, prefix, public)
                if public != name or description is not None:
                    tool = RenamedTool(tool, public, description)
                merged[public] = self._capped(tool, prefix)
        return merged

    def _capped(self, tool: Tool, provider: str) -> Tool:
        """``tool`` with its descriptions cut to ``max_description_chars``, and a warning if any was."""
        spec = self._cap.spec(tool.spec, repr(provider))
        if spec is tool.spec:
            return tool
        return RenamedTool(tool.inner if isinstance(tool, RenamedTool) else tool, spec.name, spec=spec)

    async def close(self) -> None:
        """Close every provider, collecting rather than raising their errors."""
        await asyncio.gather(*(p.close() for p in self.providers), return_exceptions=True)


def _described(spec: ToolSpec, cuts: list[str]) -> str:
    """What was cut, for the warning: ``its description (120000 characters) and 2 description(s) in its
    parameters (properties/q, $defs/Where)``."""
    parts = [f"its description ({len(spec.description)} characters)"] if "description" in cuts else []
    inner = [where for where in cuts if where != "description"]
    if inner:
        shown = ", ".join(inner[:5]) + (", ..." if len(inner) > 5 else "")
        parts.append(f"{len(inner)} description(s) in its parameters ({shown})")
    return " and ".join(parts)
