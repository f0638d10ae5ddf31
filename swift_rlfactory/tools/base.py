"""The tool protocol: what every tool backend (Python function, MCP server) looks like to the executor.

Tools, tool providers, and the two kinds of failure (:class:`ToolError`, not retried;
:class:`TransportError`, retried) are described in docs/tools.md ("The tool protocol").
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


class ToolError(Exception):
    """The tool ran and reported a failure; shown to the model, never retried."""


def stray_cancellation(name: str) -> ToolError:
    """The error a call of tool ``name`` ends in when the tool raised CancelledError of its own (see
    :func:`~swift_rlfactory.runtime.calls.cancelled_by_caller`). :meth:`PythonTool.call
    <.python_tool.PythonTool.call>` raises it, and the executor for any other backend, so the model reads
    the same words whatever the backend."""
    return ToolError(f"CancelledError: tool {name!r} awaited something that was cancelled; the call was not")


class TransportError(Exception):
    """The tool could not be reached; the executor retries these.

    ``delivered`` says whether the call may have reached the tool before the failure (a connection that
    dropped mid-call), so that a retry may run it twice and is marked ``repeated``. A backend that knows
    the call never left (its server is down and no session could be opened) raises with
    ``delivered=False``, and its retries are no repeats.
    """

    def __init__(self, *args: object, delivered: bool = True):
        super().__init__(*args)
        self.delivered = delivered


@dataclass(frozen=True)
class ToolSpec:
    """Name, description and JSON-schema parameters of a tool, as the model sees them."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def openai_schema(self) -> dict[str, Any]:
        """The OpenAI ``tools=[...]`` entry, which ms-swift agent templates and vLLM both accept."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def renamed(self, name: str, description: str | None = None) -> ToolSpec:
        """A copy under another public name (two servers expose the same tool name, or a server's name is
        no valid function name), with another description if one is given."""
        return ToolSpec(name=name, description=self.description if description is None else description,
                        parameters=self.parameters)  # fmt: skip


class CallAccount(Protocol):
    """What a backend may tell the executor about the call it is running (a ``ToolRecord`` satisfies it).

    ``attempts`` counts every time the backend was asked to run the call; ``repeated`` is set when it ran
    again after an earlier try may already have executed it, so side effects may have happened twice.
    """

    attempts: int
    repeated: bool


current_call: ContextVar[CallAccount | None] = ContextVar("rlfactory_current_call", default=None)
"""The account of the tool call running in this task, set by the executor around ``Tool.call``.

A backend that retries by itself (an MCP provider re-running calls that were in flight when its server
died) records those tries here, so the trajectory log says how often a call really ran."""


@runtime_checkable
class Tool(Protocol):
    """One callable tool. ``call`` returns any JSON-like value; the executor renders it to text.

    A tool may also carry ``timeout_s`` (seconds, or ``None``): its own per-call timeout, which the executor
    uses instead of ``limits.call_timeout_s`` (an MCP server's ``timeout`` in its config sets it).
    """

    spec: ToolSpec

    async def call(self, arguments: dict[str, Any]) -> Any:
        """Run the tool. Raise :class:`ToolError` or :class:`TransportError` on failure."""
        ...


@runtime_checkable
class ToolProvider(Protocol):
    """A source of tools with a lifetime: started before the first call, closed after the last.

    ``name`` identifies the provider (an MCP server's key in ``mcpServers``) and prefixes its tool names
    when another provider already offers the same name.
    """

    name: str

    async def start(self) -> list[Tool]:
        """Start the backend (spawn, connect, ...) and return the tools it offers."""
        ...

    async def close(self) -> None:
        """Release everything ``start`` acquired. Safe to call twice."""
        ...


@runtime_checkable
class ChangingToolProvider(ToolProvider, Protocol):
    """A provider whose tools may change while it runs (an MCP server that sends
    ``notifications/tools/list_changed``).

    The tools ``start`` returned are the ones the model is shown, for the whole run (the system prompt is
    rendered once). ``late_tool`` is asked for a name the model called that is none of them: the tool of
    that name the provider has begun to offer since, or ``None``.
    """

    async def late_tool(self, name: str) -> Tool | None:
        """The tool ``name`` offered since start-up, or ``None`` when there is none."""
        ...
