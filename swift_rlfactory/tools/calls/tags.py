"""The tags that frame tool calls and reasoning in model text, and where a ``<tool_call>`` block ends."""

from __future__ import annotations

import re

OPEN, CLOSE = "<tool_call>", "</tool_call>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
PARAM_OPEN, PARAM_CLOSE = "<parameter=", "</parameter>"  # an XML call's value
PARAM_TAG = re.compile(r"<parameter=[^>\n]*>")
FUNCTION_OPEN = "<function="  # an XML call's first tag
NEXT_CALL = re.compile(r"<tool_call>\s*<function=")  # an XML call: an XML value before it never closed
TURN_PATTERN = (
    r"<\|(?!python_tag\|>)[\w.:-]{1,64}\|>"  # <|im_end|>, <|eot_id|>, <|endoftext|>; Llama's <|python_tag|> is a call
    r"|<\uff5c[^<>\uff5c\s]{1,64}\uff5c>"  # DeepSeek's full-width <｜end▁of▁sentence｜>
    r"|</?s>|<[be]os>|<(?:start|end)_of_turn>|<\|turn>|<turn\|>"  # Llama 2 / Mistral, Gemma
)
TURN_TOKEN = re.compile(TURN_PATTERN)
"""A chat template's special token (end of turn or text, start of a message, a header): never the model's
text. It ends a ``<tool_call>`` block still open, as the end of the text would, and is left out of the
visible reply."""


def block_end(text: str, pos: int) -> int:
    """The next ``</tool_call>``, ``<tool_call>`` or turn token from ``pos``, taken literally, or the end of
    ``text``."""
    end = text.find(OPEN, pos)
    end = len(text) if end < 0 else end
    close = text.find(CLOSE, pos, end)  # bounded by the next opening tag: many blocks stay linear
    end = end if close < 0 else close
    turn = TURN_TOKEN.search(text, pos, end)
    return end if turn is None else turn.start()


def ends_block(text: str, pos: int) -> bool:
    """Whether a tag or turn token that ends a block stands at ``pos``."""
    return text.startswith((CLOSE, OPEN), pos) or TURN_TOKEN.match(text, pos) is not None


def past_end(text: str, end: int) -> int:
    """Where the search for the next block goes on after a block that ends at ``end``: past its
    ``</tool_call>`` or turn token, when that is what ends it."""
    if text.startswith(CLOSE, end):
        return end + len(CLOSE)
    turn = TURN_TOKEN.match(text, end)
    return end if turn is None else turn.end()


def without_reasoning(text: str) -> str:
    """``text`` less its reasoning: what follows the last ``</think>``, and nothing after a ``<think>`` that
    is never closed."""
    close = text.rfind(THINK_CLOSE)
    rest = text[close + len(THINK_CLOSE) :] if close >= 0 else text
    opened = rest.find(THINK_OPEN)
    return rest if opened < 0 else rest[:opened]
