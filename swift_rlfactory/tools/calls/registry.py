"""The open registry of tool-call formats: each format registers itself by name, and a run takes the
parser of the format its prompt asks for from :func:`call_parser`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from .call import ToolCall

CallParser = Callable[[str], list[ToolCall]]
"""Model text in, the calls in it out (error calls included); never raises."""

Tools = Sequence[Mapping[str, Any]] | None
"""The tools a conversation offers, as OpenAI-style schemas (wrapped or not), as a dataset row holds them."""


class CallFormat(Protocol):
    """A tool-call format: its ``name`` and how to read it in a conversation that offers ``tools``."""

    @property
    def name(self) -> str:
        """The name runs and configs know the format by."""
        ...

    def parser(self, tools: Tools) -> CallParser:
        """The parser of this format for a conversation offering ``tools``."""
        ...


_FORMATS: dict[str, CallFormat] = {}


def register(call_format: CallFormat) -> CallFormat:
    """Add ``call_format`` under its name (returned, so a module can register its format as it defines it).

    Registering the same object again changes nothing; another format under a taken name is an error.
    """
    taken = _FORMATS.get(call_format.name)
    if taken is not None and taken is not call_format:
        raise ValueError(f"a tool-call format named {call_format.name!r} is registered already")
    _FORMATS[call_format.name] = call_format
    return call_format


def registered(name: str) -> CallFormat | None:
    """The format registered as ``name``, or ``None``."""
    return _FORMATS.get(name)


def call_formats() -> tuple[str, ...]:
    """The names of the registered formats, in the order they registered."""
    return tuple(_FORMATS)


def call_parser(call_format: str, tools: Tools = None) -> CallParser:
    """The parser of ``call_format`` for a conversation offering ``tools`` (OpenAI-style schemas)."""
    found = _FORMATS.get(call_format)
    if found is None:
        raise ValueError(f"unknown tool-call format {call_format!r}: use one of {', '.join(_FORMATS)}")
    return found.parser(tools)
