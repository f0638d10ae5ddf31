"""An agent served as an MCP server: a policy, its environment and tools behind one MCP tool.

The tool takes a task in words, runs one episode of it through the evaluation's agent loop
(:func:`~.runner.run_row`, the code ``swift-rlfactory eval`` runs) and answers with the final answer and
a short trace. Transports, concurrency, episodes and errors: docs/serve-agent.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sys
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver.utilities.logging import configure_logging
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    TextContent,
    Tool,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Console

from swift_rlfactory import __version__, redaction
from swift_rlfactory.bundled.models import choose_model

from ..env.environment import Environment
from ..rewards.rules import extract_answer, visible_reply
from ..tools.observation import encodable
from ..tools.toolset import DescriptionCap
from ..trajectory import Trajectory
from .event_store import MemoryEventStore
from .policy import PolicyOptions, load_policy
from .runner import Policy, run_row, start_for

TRANSPORTS = ("stdio", "http")
HTTP_PATH = "/mcp"
RETRY_MS = 1000  # the SSE retry field: how long a client whose stream closed waits before it reconnects
_SHOWN_ARGUMENTS = 200  # characters of a call's arguments in the text trace


class CallTrace(BaseModel):
    """One tool call the agent made."""

    turn: int = Field(description="the assistant turn that made it, from 1")
    tool: str
    arguments: Any = Field(description="the arguments as the agent wrote them")
    error: str | None = Field(default=None, description="why it failed; null when it ran")


# The tool's arguments (no docstring: it would become the input schema's description).
class _Task(BaseModel):
    model_config = ConfigDict(title="agentArguments")

    task: str = Field(description="the task for the agent, in words")


class AgentReply(BaseModel):
    """What the agent answered, and how it got there."""

    answer: str = Field(description="the final <answer> block, else the last turn's visible reply")
    stop_reason: str = Field(description="answer, max_turns, context or length")
    turns: int = Field(description="assistant turns the agent took")
    tool_calls: list[CallTrace] = Field(description="every tool call, in order")


def tool_name_for(env_name: str) -> str:
    """An MCP tool name (letters, digits, ``_`` and ``-``, at most 64) made of an environment's name."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", env_name).strip("_")[:64] or "agent"


def reply_of(trajectory: Trajectory) -> AgentReply:
    """A finished trajectory as the tool's answer."""
    final = trajectory.final_response
    answer = extract_answer(final)
    calls = [
        CallTrace(
            turn=c.get("turn", 0), tool=c.get("tool", ""), arguments=c.get("arguments"), error=c.get("error")
        )
        for c in trajectory.tool_calls
    ]
    return AgentReply(
        answer=visible_reply(final).strip() if answer is None else answer,
        stop_reason=trajectory.stop_reason,
        turns=trajectory.turns,
        tool_calls=calls,
    )


def reply_text(reply: AgentReply) -> str:
    """The answer and a short trace as text: what a calling model reads."""
    lines = [
        f"answer: {reply.answer}",
        f"trace: {reply.turns} turns, stop {reply.stop_reason}, {len(reply.tool_calls)} tool calls",
    ]
    for call in reply.tool_calls:
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        if len(arguments) > _SHOWN_ARGUMENTS:
            arguments = arguments[:_SHOWN_ARGUMENTS] + "..."
        outcome = f"error: {call.error}" if call.error else "ok"
        lines.append(f"- turn {call.turn}: {call.tool} {arguments} -> {outcome}")
    return "\n".join(lines)


def _error(reason: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=reason)], is_error=True)


class AgentService:
    """Runs one episode per task, at most ``concurrency`` at once, each with its own episode state.

    Args:
        env: the environment, started (:func:`~.runner.start_for`).
        policy: the policy its episodes generate with.
        max_turns: assistant turns per episode.
        concurrency: episodes in flight; further calls wait for a place.
    """

    def __init__(self, env: Environment, policy: Policy, max_turns: int, concurrency: int):
        self.env, self.policy, self.max_turns = env, policy, max_turns
        self.tools = env.tool_schemas()
        self.cap = DescriptionCap(env.config.limits.max_description_chars)
        self._gate = asyncio.Semaphore(concurrency)

    async def run(self, task: str) -> CallToolResult:
        """One episode of ``task``: its reply, or an error result saying why the episode failed."""
        if not task.strip():
            return _error("the task is empty: give the agent something to do")
        # another agent's words, defused as a tool result is: a "<|im_end|>" in them would end the user turn
        row = {"messages": [{"role": "user", "content": encodable(task)}]}
        async with self._gate:
            try:
                trajectory = await run_row(
                    row, self.policy, self.env, self.max_turns, self.tools, self.cap,
                    key=f"serve-{uuid.uuid4().hex}", score=False,
                )  # fmt: skip
            except Exception as exc:  # a setup that failed, a prompt the engine refused: this call only
                return _error(redaction.redact(f"the agent's episode failed: {type(exc).__name__}: {exc}"))
        if trajectory.stop_reason == "error":
            return _error(redaction.redact(f"the agent's episode failed: {trajectory.error}"))
        reply = reply_of(trajectory)
        return CallToolResult(
            content=[TextContent(type="text", text=reply_text(reply))],
            structured_content=reply.model_dump(mode="json"),
        )


def build_server(service: AgentService, tool_name: str, description: str) -> Server:
    """An MCP server whose one tool, ``tool_name``, is ``service``.

    It declares only the tools capability, so a request for what it does not offer (prompts, resources,
    completions, logging) is answered "method not found", and a call of any other tool is a protocol error
    (``-32602``); arguments that are no task are a tool error the caller's model can read and correct.
    """
    tool = Tool(
        name=tool_name,
        description=description,
        input_schema=_Task.model_json_schema(),
        output_schema=AgentReply.model_json_schema(),
    )

    async def list_tools(ctx: ServerRequestContext, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=[tool])

    async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> CallToolResult:
        if params.name != tool_name:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
        try:
            task = _Task.model_validate(params.arguments or {}).task
        except ValidationError as exc:
            wrong = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            return _error(f'invalid arguments ({wrong}): give {{"task": "..."}}')
        return await service.run(task)

    configure_logging("WARNING")  # the SDK's warnings and ours go to stderr, rendered by rich
    return Server(tool_name, version=__version__, on_list_tools=list_tools, on_call_tool=call_tool)


def describe(env: Environment, max_turns: int) -> str:
    """The tool's default description: whose agent it is and what it can use."""
    tools = ", ".join(env.executor.tools) or "no tools"
    return (
        f"An agent of environment {env.name!r}: give it a task in words; it works on it with its tools "
        f"({tools}) in at most {max_turns} turns and returns its final answer and a short trace."
    )


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send whatever is written to file descriptor 1 to stderr until the block ends: over stdio, stdout is
    the MCP channel, and a model's loading messages there would be read as protocol."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def serve(
    env_path: Path,
    options: PolicyOptions,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    tool_name: str | None = None,
) -> int:
    """Load the environment and the policy (a bad one raises here, naming it), then serve until stopped."""
    if transport not in TRANSPORTS:
        raise ValueError(f"--transport {transport}: use one of {', '.join(TRANSPORTS)}")
    options.validate()
    say = Console(stderr=True, emoji=False, highlight=False)
    # a taken port fails before the model loads
    listener = _listen(host, port) if transport == "http" else None
    with stdout_to_stderr():
        model = choose_model(options.model) if options.model else None
        env = Environment.load(env_path)
    with closing(env):
        with stdout_to_stderr():
            try:
                policy = load_policy(options, model, say)
            except Exception as exc:
                which = f"--model {options.model}" if options.model else f"--base-url {options.base_url}"
                raise ValueError(
                    redaction.redact(f"{which}: cannot load it: {type(exc).__name__}: {exc}")
                ) from exc
            if options.base_url:  # an endpoint that is down or serves another model fails here, not at a call
                policy.check_served()
            start_for(env, policy)
        max_turns = min(options.max_turns or env.max_turns, env.max_turns)
        service = AgentService(env, policy, max_turns, options.concurrency)
        name = tool_name or tool_name_for(env.name)
        server = build_server(service, name, describe(env, max_turns))
        if listener is None:
            say.print(f"serving tool {name!r} over stdio", markup=False)
            asyncio.run(_stdio(server, policy))
        else:
            bound_host, bound_port = listener.getsockname()[:2]
            say.print(
                f"serving tool {name!r} at http://{_url_host(bound_host)}:{bound_port}{HTTP_PATH}",
                markup=False,
            )
            asyncio.run(_http(server, policy, listener, host))
    return 0


async def _stdio(server: Server, policy: Any) -> None:
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await _close_policy(policy)


async def _http(server: Server, policy: Any, listener: socket.socket, host: str) -> None:
    import uvicorn

    # resumable: a client that lost its stream during a call reconnects with Last-Event-ID
    app = server.streamable_http_app(
        streamable_http_path=HTTP_PATH, host=host, event_store=MemoryEventStore(), retry_interval=RETRY_MS
    )
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    try:
        await web.serve(sockets=[listener])
    finally:
        await _close_policy(policy)


async def _close_policy(policy: Any) -> None:
    close = getattr(policy, "aclose", None)
    if close is not None:
        await close()


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: any free one), or ``ValueError`` saying why not."""
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise ValueError(f"--port {port}: cannot serve on {host}:{port} ({exc.strerror or exc})") from None
    return listener


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
