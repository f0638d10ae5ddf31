"""Text as it travels to and from JSON APIs (MCP servers, OpenAI-compatible chat endpoints), and when to
ask them again: :func:`sendable`, :func:`content_text`, :func:`retry_after`.

docs/runtime.md ("Text to and from JSON APIs") says what each one is for.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

RETRY_AFTER_MAX_S = 30.0
"""Longest wait a ``Retry-After`` gets: a server that asks for an hour fails the call instead of holding it."""


def sendable(value: Any) -> Any:
    """``value`` with every string JSON can carry: lone UTF-16 surrogates become U+FFFD, in dicts and lists
    too; anything else is returned as it is."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, dict):
        return {sendable(k): sendable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [sendable(v) for v in value]
    return value


def content_text(content: Any) -> str:
    """A chat message's content as text: a string, the text parts of a list of parts joined, else ``""``."""
    if isinstance(content, list):
        return "".join(
            p.get("text") or "" for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return content if isinstance(content, str) else ""


def retry_after(headers: Mapping[str, str]) -> float | None:
    """A response's ``Retry-After`` in seconds, at most :data:`RETRY_AFTER_MAX_S`; ``None`` when absent or
    unreadable. Wait ``max(back-off, retry_after(...) or 0)``: the server's word when it asks for longer."""
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(0.0, seconds), RETRY_AFTER_MAX_S)
