"""What a parser returns (:class:`ToolCall`), what one block holds while it is read (:class:`Body`), and the
short quotations error calls show the model."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 100
"""Deepest nesting of objects and arrays accepted in a call; no tool schema comes near it."""

EXCERPT = 60
"""The longest quotation of the model's text in an error message."""


@dataclass
class ToolCall:
    """One call the model asked for. ``error`` is set when the call will not run, and ``error_kind`` says
    why: ``"parse"`` (it could not be understood) or ``"limit"`` (one call too many for the turn)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    raw: str = ""
    error_kind: str = "parse"


@dataclass
class Body:
    """What one block holds: its JSON ``values``, or the ``error`` that stopped reading them."""

    end: int  # where the block's text stops
    resume: int  # where the search for the next block goes on
    values: list[Any] = field(default_factory=list)
    error: str | None = None


class DuplicateKey(ValueError):
    """A key written twice in one JSON object (raised by :func:`no_duplicates` while reading)."""

    SAYS = "is written twice in one object"

    def __init__(self, key: str):
        super().__init__(f"the key {quote(key)} {self.SAYS}")
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


def no_constant(name: str) -> Any:
    """``json.loads``'s hook for ``NaN`` and ``Infinity``, which Python reads and strict JSON does not."""
    raise ValueError(f"{name} is not JSON")


def too_deep(value: Any) -> bool:
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


def near(text: str, pos: int) -> str:
    """The model's text from just before ``pos``, quoted for an error message."""
    return quote(text[max(0, pos - 20) : pos + EXCERPT - 20])


def tail(text: str, end: int) -> str:
    """The last few characters before ``end`` (trailing space aside), quoted."""
    return quote(text[max(0, end - 4 * EXCERPT) : end].rstrip()[-EXCERPT:])


def quote(text: str) -> str:
    """``text`` as a short, one-line quotation that any transport can carry."""
    if len(text) > EXCERPT:
        text = text[: EXCERPT - 3] + "..."
    return json.dumps(clean(text), ensure_ascii=False)


def clean(text: str) -> str:
    """``text`` with lone surrogates written as escapes, so it encodes as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
