"""Turn whatever a tool returned into the one string the model will read.

Tools return many shapes: plain text, numbers, dicts and lists (Python tools), or MCP ``CallToolResult``
content blocks (text, images, embedded resources, structured content). The model only ever sees text, so
this module is the single place that decides how each shape reads. Dicts are rendered as compact JSON, so
a tool returning a dict never trips a schema validator (RL-Factory issue #111).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

IMAGE_PLACEHOLDER = "<image>"


def render(result: Any) -> str:
    """Render a tool result as observation text.

    >>> render({"a": 1})
    '{"a": 1}'
    >>> render(["x", 2])
    'x\\n2'
    """
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    if isinstance(result, bytes):
        return result.decode("utf-8", errors="replace")
    if isinstance(result, (int, float, bool)):
        return json.dumps(result)
    if isinstance(result, dict):
        return json.dumps(result, ensure_ascii=False, default=str)
    if isinstance(result, (list, tuple)):
        return "\n".join(render(item) for item in result)
    return _render_mcp_block(result)


def _render_mcp_block(block: Any) -> str:
    """MCP content blocks (``TextContent``, ``ImageContent``, ...), duck-typed on their ``type`` field."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return IMAGE_PLACEHOLDER if kind == "image" else "<audio>"
    if kind == "resource":
        resource = block.resource
        return getattr(resource, "text", None) or f"<resource {resource.uri}>"
    if kind == "resource_link":
        return f"<resource {block.uri}>"
    if hasattr(block, "model_dump"):
        return json.dumps(block.model_dump(mode="json"), ensure_ascii=False)
    return str(block)


def truncate(text: str, max_tokens: int | None, count_tokens: Callable[[str], int] | None = None) -> str:
    """Cut ``text`` to about ``max_tokens`` tokens, saying how much was dropped.

    With a ``count_tokens`` function (a tokenizer) the cut is exact; without one it assumes four
    characters per token, which over-estimates for English and is safe for a context budget.
    """
    if not max_tokens or max_tokens <= 0:
        return text
    if count_tokens is None:
        limit = max_tokens * 4
        if len(text) <= limit:
            return text
        return f"{text[:limit]}\n... [truncated {len(text) - limit} characters]"
    if count_tokens(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return f"{text[:lo]}\n... [truncated {len(text) - lo} characters]"
