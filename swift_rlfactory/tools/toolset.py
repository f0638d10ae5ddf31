"""A set of tool providers started together, with one namespace of unique tool names.

Two MCP servers may both offer ``search``. The first keeps the plain name; later ones are exposed as
``<provider>_<tool>`` (``<provider>_<tool>_2``, ``_3``, ... if that is taken too, and never another tool's
own name), and the schema the model sees carries that public name while the call still reaches the server
under its own name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from .base import Tool, ToolProvider, ToolSpec


class RenamedTool:
    """A tool exposed under another public name; calls (and its own ``timeout_s``) go to the original."""

    def __init__(self, inner: Tool, name: str):
        self.inner = inner
        self.spec: ToolSpec = inner.spec.renamed(name)

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
        own = {tool.spec.name for tools in results for tool in tools}  # a rename never takes one of these
        merged: dict[str, Tool] = {}
        for provider, tools in zip(self.providers, results, strict=True):
            for tool in tools:
                name = tool.spec.name
                if name in merged:
                    prefix = getattr(provider, "name", type(provider).__name__)
                    public, n = f"{prefix}_{name}", 2
                    while public in merged or public in own:
                        public, n = f"{prefix}_{name}_{n}", n + 1
                    tool = RenamedTool(tool, public)
                merged[tool.spec.name] = tool
        return merged

    async def close(self) -> None:
        """Close every provider, collecting rather than raising their errors."""
        await asyncio.gather(*(p.close() for p in self.providers), return_exceptions=True)
