"""The stdio transport: the server as our subprocess (its own process group), stdout read as capped lines,
stderr forwarded redacted, and ended as the SDK ends it. See docs/mcp.md, "Transports"."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, TextIO

import anyio
from anyio.abc import Process
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from swift_rlfactory.redaction import remember_url

from ..config import PASSTHROUGH_ENV, PYTHON_COMMANDS, McpServerConfig
from ..framing import LineReader, error_reply
from ..stderr import forward_stderr
from .context import TransportContext

logger = logging.getLogger("swift_rlfactory.tools.mcp")

# Closing a stdio session closes the server's stdin, waits 2 s, then SIGTERMs and SIGKILLs it (SDK policy).
_EXIT_GRACE_S = 2.0


@asynccontextmanager
async def stdio_transport(context: TransportContext, cap: int) -> AsyncIterator[tuple[Any, Any]]:
    """A stdio server as a transport, with stdout lines capped at ``cap`` bytes.

    The SDK's own stdio client grows a string for each line until its newline arrives, so one 100 MB result
    holds the session's reader (and every later call) for as long as the concatenation takes. Here lines
    are counted in bytes and, past the cap, skipped as they stream in; the request they answered gets an
    error reply. Shutdown follows the SDK's policy: close stdin, wait, then SIGTERM/SIGKILL the group.
    """
    config = context.config
    assert config.command is not None
    command = sys.executable if config.command in PYTHON_COMMANDS else config.command
    process = await anyio.open_process(
        [command, *config.args], env=_server_env(config), stderr=subprocess.PIPE, cwd=config.cwd,
        start_new_session=True,
    )  # fmt: skip
    context.process = process
    assert process.stderr is not None
    stderr_done = anyio.Event()
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    lines = LineReader(cap)

    async def read_stdout() -> None:
        assert process.stdout is not None
        async with to_session:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
                async for chunk in process.stdout:
                    for message in lines.feed(chunk):
                        await to_session.send(message)

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    try:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    except ValueError as exc:  # unserialisable: fail this request, not the session
                        request_id = getattr(message.message, "id", None)
                        if request_id is not None:
                            await to_session.send(error_reply(request_id, f"cannot send the call: {exc}"))
                        continue
                    await process.stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()  # the server is gone: let the session see the connection end

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdout)
        tg.start_soon(write_stdin)
        tg.start_soon(forward_stderr, process.stderr, _server_stderr(), stderr_done, context.label)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await _stop_process(process)
                # The server's last words (a traceback) are passed on before anyone reports its end; a
                # grandchild that keeps the pipe open past the grace is cut off, not waited for.
                with anyio.move_on_after(_EXIT_GRACE_S):
                    await stderr_done.wait()
                with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await process.stderr.aclose()
                for stream in (read_stream, write_stream):
                    await stream.aclose()
            tg.cancel_scope.cancel()


async def _stop_process(process: Process) -> None:
    """Close stdin, give the server a moment to exit, then end its whole process group."""
    assert process.stdin is not None and process.stdout is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, _EXIT_GRACE_S):
        with suppress(ProcessLookupError, OSError):
            await terminate_posix_process_tree(process, _EXIT_GRACE_S)
        if not await _exited(process, _EXIT_GRACE_S):
            logger.warning("MCP server process %d survived SIGKILL; abandoning it", process.pid)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


async def _exited(process: Process, timeout: float) -> bool:
    """Whether the process ended within ``timeout``, by polling its return code: ``wait()`` would also wait
    for the pipes to close, which a grandchild holding them open can delay forever."""
    with anyio.move_on_after(timeout):
        while process.returncode is None:
            await anyio.sleep(0.01)
    return process.returncode is not None


_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


def _server_env(config: McpServerConfig) -> dict[str, str]:
    """A stdio server's environment: the SDK's safe variables plus :data:`PASSTHROUGH_ENV` plus ``env:``;
    with ``inherit_env: true`` ours entire, plus ``env:``.

    A proxy URL may carry a password (``http://user:pass@proxy:3128``); it is recorded as a secret
    (:func:`~swift_rlfactory.redaction.remember_url`), so a log line or an observation that shows the URL
    shows ``user:***@``."""
    env = (
        {**os.environ, **config.env}
        if config.inherit_env
        else {
            **get_default_environment(),
            **{name: os.environ[name] for name in PASSTHROUGH_ENV if name in os.environ},
            **config.env,
        }
    )
    for name in _PROXY_ENV:
        if env.get(name):
            remember_url(env[name])
    return env


def _server_stderr() -> TextIO:
    """Where a stdio server's stderr is forwarded, redacted (:mod:`..stderr`): ours, or the process's
    own when ours is no real file (a notebook)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__
    return sys.stderr
