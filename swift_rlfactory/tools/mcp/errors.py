"""One-line accounts of what went wrong, for logs and observations: transport failures, replies that are
no valid MCP, results an ``outputSchema`` rejects."""

from __future__ import annotations

import re
import shlex
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED
from pydantic import ValidationError

from swift_rlfactory.redaction import redact

from .config import McpServerConfig

# The SDK's RuntimeErrors for a result its tool's outputSchema rejects (ClientSession.validate_tool_result).
OUTPUT_SCHEMA_FAULT = re.compile(
    r"Invalid structured content returned by tool |Tool .* has an output schema but did not return"
    r"|Invalid schema for tool ",
    re.S,
)


def output_schema_fault(exc: RuntimeError) -> str:
    """One short line for a result the tool's outputSchema rejects, in place of the SDK's message (which
    holds jsonschema's multi-line dump of the whole schema and instance): the first error and where."""
    message, cause = str(exc), exc.__cause__
    if message.startswith("Tool "):
        return "it has an outputSchema but returned no structured content"
    if message.startswith("Invalid schema"):
        first = str(getattr(cause, "message", None) or message.partition(": ")[2]).splitlines()[0]
        return f"its outputSchema is not a valid JSON schema: {first[:200]}"
    first = str(getattr(cause, "message", None) or message.partition(": ")[2].splitlines()[0])
    path = getattr(cause, "json_path", "$")
    where = f" (at {path})" if path != "$" else ""
    return f"it returned structured content that does not match its outputSchema: {first[:200]}{where}"


def invalid(exc: ValidationError) -> str:
    """A short account of why a result failed validation: where, and for a content block what is wrong."""
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"][:2])
    if where.startswith("content.") and len(first["loc"]) > 3:
        return f"{where}: {_block_fault(errors, first['loc'][:2])}"[:200]
    value = first.get("input")
    if isinstance(value, dict) and "name" in value and where.startswith("tools."):
        return f"tool {str(value['name'])[:80]!r}: {'.'.join(map(str, first['loc'][2:]))}: {first['msg']}"[
            :200
        ]
    return f"{where}: {first['msg']}"[:200]


def _block_fault(errors: list[Any], at: tuple[Any, ...]) -> str:
    """What is wrong with the content block at ``at``, from pydantic's errors for every kind of block.

    A block's ``type`` is always one we know here (:mod:`.mending` replaced the others), so the kinds whose
    ``type`` the errors say it does not have are set aside, and the first error of its own kind is the
    fault: ``a 'text' block without text`` reads ``'text' block: text: Field required``. Union members'
    class names are left out of the field's path.
    """
    wrong_kind = [e for e in errors if e["loc"][:2] == at and e["loc"][3:] == ("type",)]
    other = {e["loc"][:3] for e in wrong_kind}
    own = [e for e in errors if e["loc"][:2] == at and len(e["loc"]) > 3 and e["loc"][:3] not in other]
    if not own or not wrong_kind:
        return errors[0]["msg"]
    field = ".".join(str(part) for part in own[0]["loc"][3:] if not str(part)[:1].isupper())
    return f"{str(wrong_kind[0]['input'])[:50]!r} block: {field}: {own[0]['msg']}"


def describe(exc: BaseException, stdio: bool = False) -> str:
    """A one-line cause, digging through the exception groups that anyio task groups raise; ``stdio`` when
    the server is a subprocess of ours, whose stderr (printed above) may say why it closed the connection."""
    leaves = getattr(exc, "exceptions", None)
    if leaves:
        # A transport failure arrives with the session's own "connection closed" beside it; the former says why.
        leaves = sorted(leaves, key=lambda e: isinstance(e, MCPError))
        return describe(leaves[0], stdio)
    if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
        if stdio:
            return "the server closed the connection (its stderr, above, may say why)"
        return (
            "the connection to the server closed (the server stopped or dropped it; its own log may say why)"
        )
    return redact(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def endpoint(config: McpServerConfig) -> str:
    """The command line of a stdio server or the URL of a remote one, for (redacted) error messages."""
    if config.command is not None:
        return shlex.join([config.command, *config.args])
    return f"{config.kind} {config.url}"
