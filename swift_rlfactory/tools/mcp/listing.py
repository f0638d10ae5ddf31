"""Listing a server's tools (``tools/list``, paged) as :class:`~..base.ToolSpec`, and the size of what the
listed schemas put into every prompt. See docs/mcp.md, "Listing"."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import PaginatedRequestParams
from pydantic import ValidationError

from ..base import ToolSpec
from .errors import describe, invalid

logger = logging.getLogger(__package__)

LARGE_SCHEMA_CHARS = 100_000
"""Tool schemas (as :func:`schema_chars` counts them) past which a server's start-up warns: about 25,000
tokens, rendered into the system prompt of every trajectory, more than many a ``--max_length``."""

_MAX_TOOL_PAGES = 1000


async def list_tools(client: ClientSession, notes: list[str]) -> list[ToolSpec]:
    """Every tool the server offers, following pagination cursors; a tool listed twice counts once.

    A tool that can only run as an MCP *task* (``execution.taskSupport: "required"``; server-everything's
    ``simulate-research-query``) is left out, with one note naming every such tool: this client does not
    speak the tasks protocol, so the model would only ever read "requires task augmentation" errors.
    A cursor the server already sent (a server paging in a loop), or more than :data:`_MAX_TOOL_PAGES`
    pages, fails start-up with an error saying so, instead of listing until the handshake times out.
    """
    specs: dict[str, ToolSpec] = {}
    task_only: list[str] = []
    seen: set[str] = set()
    cursor: str | None = None
    while True:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        try:
            page = await client.list_tools(params=params)
        except ValidationError as exc:
            raise RuntimeError(f"the server's tools/list reply is not valid MCP: {invalid(exc)}") from None
        for t in page.tools:
            if t.name in specs or t.name in task_only:
                notes.append(f"listed tool {t.name!r} more than once; using the first")
                continue
            if t.execution is not None and t.execution.task_support == "required":
                task_only.append(t.name)
                continue
            specs[t.name] = ToolSpec(
                name=t.name,
                description=t.description or t.title or "",
                parameters=_prompt_schema(t.input_schema),
            )
        cursor = page.next_cursor
        if not cursor:
            if task_only:
                notes.append(
                    f"{len(task_only)} tool(s) left out, as they run only as MCP tasks "
                    f"(execution.taskSupport: required), which this client does not support: "
                    f"{', '.join(map(repr, task_only))}"
                )
            return list(specs.values())
        if cursor in seen or len(seen) >= _MAX_TOOL_PAGES:
            why = "sent a cursor again" if cursor in seen else f"sent more than {_MAX_TOOL_PAGES} pages"
            raise RuntimeError(f"tools/list never ends: the server {why} ({cursor[:80]!r})")
        seen.add(cursor)


def _prompt_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's ``inputSchema`` as the model reads it in every prompt: without its ``"$schema"``.

    zod-to-json-schema (every TypeScript SDK server) writes ``"$schema":
    "http://json-schema.org/draft-07/schema#"`` into each tool's schema, about 15 tokens a tool that say
    nothing about the arguments. Nothing here validates arguments against the schema (the server does, with
    its own), and what types them (``$ref``, ``definitions``, ``$defs``, ``additionalProperties``) stays.
    """
    return {key: value for key, value in schema.items() if key != "$schema"}


async def undeclared_tools(client: ClientSession, notes: list[str]) -> list[ToolSpec]:
    """The tools of a server that did not declare the tools capability, asked for all the same.

    A resources- or prompts-only server may answer ``tools/list`` with "method not found" (the
    specification lets it): no tools, nothing to say. But some servers list tools without declaring the
    capability; loading none of their tools would leave the model without them and nobody told why, so
    they are used, with a note saying the server forgot the capability.
    """
    try:
        tools = await list_tools(client, notes)
    except (MCPError, RuntimeError) as exc:
        logger.debug("MCP server without the tools capability has no tools/list: %s", describe(exc))
        return []
    if tools:
        notes.append(
            f"did not declare the tools capability in its initialize reply, but lists {len(tools)} tool(s); "
            "using them"
        )
    return tools


def schema_chars(specs: Iterable[ToolSpec]) -> int:
    """How many characters the tools ``specs`` put into every prompt, counted as chat templates render
    them: the JSON of each one's OpenAI schema (:meth:`~..base.ToolSpec.openai_schema`; an estimate: a
    template's own spacing and wording around them come on top)."""
    return sum(len(json.dumps(spec.openai_schema(), ensure_ascii=False)) for spec in specs)


def warn_if_large(server: str, specs: list[ToolSpec]) -> None:
    """Warn, with the numbers, when the tools a server shows the model pass :data:`LARGE_SCHEMA_CHARS`."""
    chars = schema_chars(specs)
    if chars > LARGE_SCHEMA_CHARS:
        logger.warning(
            "MCP server %r lists %d tools whose schemas put %d characters (about %d tokens) into every "
            "prompt (more than %d); choose the tools the model needs with includeTools or excludeTools",
            server,
            len(specs),
            chars,
            chars // 4,
            LARGE_SCHEMA_CHARS,
        )
