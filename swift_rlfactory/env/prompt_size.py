"""The start-up check of the prompt's size: the system prompt and tool schemas against the context budget.

Every trajectory starts with the environment's system prompt and tool schemas (a server listing thousands of
tools puts megabytes there): with ``--max_completion_length`` kept for the answer they must fit
``--max_length`` (else the run stops at start-up), and taking over half of it is warned about.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4  # the estimate where no tokenizer is at hand (English text and JSON: 3-4 characters)


class PromptTooLongError(ValueError):
    """The system prompt and tool schemas leave no room for the model's answer."""


@dataclass(frozen=True)
class PromptSize:
    """How many tokens the system prompt and the tool schemas take (``estimated``: counted as chars/4)."""

    tokens: int
    tools: int
    estimated: bool

    def describe(self) -> str:
        """``~1,234 tokens (system prompt and 5 tool schemas, estimated as characters/4)``."""
        how = ", estimated as characters/4" if self.estimated else ""
        schemas = f"{self.tools} tool schema{'' if self.tools == 1 else 's'}"
        return f"{'~' if self.estimated else ''}{self.tokens:,} tokens (system prompt and {schemas}{how})"


def prompt_size(
    system_prompt: str | None,
    tools: Sequence[dict[str, Any]],
    count_tokens: Callable[[str], int] | None = None,
) -> PromptSize:
    """The tokens of ``system_prompt`` and the JSON of ``tools`` as the model reads them, counted by
    ``count_tokens`` (the model's tokenizer) or else estimated as characters/4. The template's own wrapping
    of the tools (a line or two of instructions) is not counted."""
    text = (system_prompt or "") + "\n" + "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    if count_tokens is None:
        return PromptSize(-(-len(text) // CHARS_PER_TOKEN), len(tools), estimated=True)
    return PromptSize(count_tokens(text), len(tools), estimated=False)


def check_prompt_room(
    size: PromptSize, max_length: int | None, max_completion_length: int | None
) -> str | None:
    """Check ``size`` against ``--max_length`` with ``--max_completion_length`` kept for the answer.

    Raises :class:`PromptTooLongError` naming the numbers and the fix when the prompt and one full answer do
    not fit; returns a warning (also logged) when they fit but the prompt takes more than half of
    ``max_length``, so that few tool turns fit after it; else ``None``. No ``max_length``: no check.
    """
    if not max_length:
        return None
    answer = max_completion_length or 0
    if size.tokens + answer > max_length:
        room = max_length - size.tokens
        left = f"leaves {room:,} for the answer" if room > 0 else "leaves no room for the answer"
        raise PromptTooLongError(
            f"the prompt takes {size.describe()} of --max_length {max_length:,}, which {left}, and "
            f"--max_completion_length is {answer:,}: raise --max_length to at least {size.tokens + answer:,}, "
            "lower --max_completion_length, or shorten the system prompt or the tools (fewer tools, "
            "limits.max_description_chars)"
        )
    if size.tokens * 2 > max_length:
        warning = (
            f"the prompt takes {size.describe()}, more than half of --max_length {max_length:,}: after one "
            f"answer of up to {answer:,} tokens, {max_length - size.tokens - answer:,} are left for tool "
            "results and later turns, so trajectories may stop early with stop reason 'context'"
        )
        logger.warning(warning)
        return warning
    return None
