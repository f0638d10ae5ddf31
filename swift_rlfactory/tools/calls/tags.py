"""The tags that frame tool calls and reasoning in model text, and where a ``<tool_call>`` block ends."""

from __future__ import annotations

import re

OPEN, CLOSE = "<tool_call>", "</tool_call>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
PARAM_OPEN, PARAM_CLOSE = "<parameter=", "</parameter>"  # an XML call's value
PARAM_TAG = re.compile(r"<parameter=[^>\n]*>")
FUNCTION_OPEN = "<function="  # an XML call's first tag
NEXT_CALL = re.compile(r"<tool_call>\s*<function=")  # an XML call: an XML value before it never closed


def block_end(text: str, pos: int) -> int:
    """The next ``</tool_call>`` or ``<tool_call>`` from ``pos``, taken literally, or the end of ``text``."""
    end = text.find(OPEN, pos)
    end = len(text) if end < 0 else end
    close = text.find(CLOSE, pos, end)  # bounded by the next opening tag: many blocks stay linear
    return end if close < 0 else close


def past_end(text: str, end: int) -> int:
    """Where the search for the next block goes on after a block that ends at ``end``: past its
    ``</tool_call>``, when that is what ends it."""
    return end + len(CLOSE) if text.startswith(CLOSE, end) else end
