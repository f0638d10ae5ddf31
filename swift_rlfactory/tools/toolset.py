"""A set of tool providers started together, with one namespace of unique, valid tool names.

Two MCP servers may both offer ``search``. The first keeps the plain name; later ones are exposed as
``<provider>_<tool>`` (``<provider>_<tool>_2``, ``_3``, ... if that is taken too, and never another tool's
own name), and the description of each of them says which server it comes from. The schema the model sees
carries that public name while the call still reaches the server under its own name.

Every public name is a valid function name, as OpenAI's API requires (``^[a-zA-Z0-9_-]{1,64}$``) and as the
XML call format needs (a ``>`` in ``<function=t>x>`` ends the tag): other characters become ``_`` and a name
longer than 64 keeps its start plus a short hash of the whole, so the same tools always get the same names.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from .base import Tool, ToolProvider, ToolSpec

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


class RenamedTool:
    """A tool exposed under another public name; calls (and its own ``timeout_s``) go to the original."""

    def __init__(self, inner: Tool, name: str, description: str | None = None):
        self.inner = inner
        self.spec: ToolSpec = inner.spec.renamed(name, description)

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
    """Starts providers concurrently and merges their tools under unique names."""

    def __init__(self, providers: Sequence[ToolProvider]):
        self.providers = list(providers)
        self.tools: dict[str, Tool] = {}

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
                merged[public] = tool
        return merged

    async def close(self) -> None:
        """Close every provider, collecting rather than raising their errors."""
        await asyncio.gather(*(p.close() for p in self.providers), return_exceptions=True)
