"""Call formats read by a reader from outside this wing (the adapters hand in an ms-swift agent template's
``get_toolcall``): reasoning is left out first, and each call it finds is checked as every call is."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .call import ToolCall, quote
from .call_objects import calls_in
from .registry import CallParser, Tools
from .schema_types import Properties, schema_properties, typed
from .tags import without_reasoning

CallReader = Callable[[str], list[tuple[str, Any]]]
"""Model text in, ``(name, arguments)`` of each call found out (``arguments``: an object or its JSON
text); it may raise."""


@dataclass(frozen=True)
class DelegatedFormat:
    """A format whose calls ``read`` finds. ``typed_values``: the reader gives every argument as text (the
    model wrote raw values, as in XML), so values are typed by the tool's schema as Qwen3-Coder's are."""

    name: str
    read: CallReader
    typed_values: bool = False

    def parser(self, tools: Tools) -> CallParser:
        """This format's parser for a conversation offering ``tools``."""
        properties = schema_properties(tools)
        return lambda text: _parse(self, properties, text)


def _parse(fmt: DelegatedFormat, properties: dict[str, Properties], text: str) -> list[ToolCall]:
    """The calls ``fmt.read`` finds outside the reasoning of ``text``; never raises."""
    reply = without_reasoning(text)
    try:
        found = list(fmt.read(reply))
    except Exception as exc:  # an outside reader: whatever it raises is a call that could not be read
        message = f"the tool call could not be read ({type(exc).__name__}: {quote(str(exc))})"
        return [ToolCall(name="", error=message, raw=reply)]
    calls: list[ToolCall] = []
    for name, arguments in found:
        for call in calls_in({"name": name, "arguments": arguments}, reply):
            if fmt.typed_values and call.error is None:
                schemas = properties.get(call.name, {})
                call.arguments = {
                    key: _typed(value, schemas.get(key)) for key, value in call.arguments.items()
                }
            calls.append(call)
    return calls


def _typed(value: Any, schema: Mapping[str, Any] | None) -> Any:
    """A value the reader gave as text, typed by its parameter's schema (others as they are)."""
    if not isinstance(value, str):
        return value
    try:
        return typed(value, schema)
    except ValueError:  # JSON the call cannot carry (a repeated key, too deep): the text itself
        return value
