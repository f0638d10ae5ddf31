"""One Python tool call in a fresh interpreter, killed the moment the call is given up.

A thread cannot be stopped: a synchronous tool stuck in native code or an endless loop keeps its thread
(and whatever it holds) until it returns, and one that crashes the interpreter takes the trainer with it.
A tool declared ``@tool(isolation="process")`` instead runs each call in a child ``python``: a timeout
kills the child, a crash is an error observation, and the trainer's memory is never touched. The price is
a fresh interpreter per call (the tool's module is imported each time, typically 0.2-1 s), so this suits
calls that are slow or untrusted anyway: running model-written code, heavy native libraries.

The child finds the function by its module (by name, or by file for tools loaded from a ``.py`` path) and
qualified name, so it must be defined at module level; the arguments and the result travel pickled.

The reply is untrusted: the child runs whatever the tool runs (model-written code, for a code tool), and
that code can write its own bytes to the reply pipe. Unpickling those bytes as such would run any callable
they name, in the trainer. So the reply is read with :func:`~swift_rlfactory.runtime.plain_pickle.plain_loads`,
which builds plain data only (``str``, ``bytes``, numbers, ``bool``, ``None``, lists, tuples, dicts,
sets) and refuses every class or function a pickle names; a refused reply is a failed call. For the same reason a result of any other type
(a pydantic model, an MCP content block) is rendered to its observation text in the child, before it is
sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal
import sys
from collections.abc import Callable
from typing import Any

from swift_rlfactory.runtime.plain_pickle import plain_loads

from .base import ToolError

_CHILD = r"""
import importlib, importlib.util, os, pickle, sys, threading, time
parent = os.getppid()
def orphaned():  # a trainer killed outright must not leave a spinning tool behind
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(1)
threading.Thread(target=orphaned, daemon=True).start()
module_name, module_file, qualname, path, kwargs = pickle.load(sys.stdin.buffer)
sys.path[:] = path  # the parent's, in its order: the same modules, our own package among them
from swift_rlfactory.runtime.plain_pickle import plain_loads  # a module of the standard library's imports only
out = sys.stdout.buffer
sys.stdout = sys.stderr  # the tool's prints must not corrupt the reply
try:
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        if not module_file:
            raise
        spec = importlib.util.spec_from_file_location(module_name, module_file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    target = module
    for part in qualname.split("."):
        target = getattr(target, part)
    fn = getattr(target, "fn", target)  # the @tool wrapper, or the plain function
    reply = ("ok", fn(**kwargs))
except BaseException as exc:
    reply = ("error", f"{type(exc).__name__}: {exc}")
try:
    data = pickle.dumps(reply)
    try:
        plain_loads(data)
    except pickle.UnpicklingError:  # not plain data: send the text the model would read instead
        from swift_rlfactory.tools.observation import render_bounded  # imports the tools package: only now

        data = pickle.dumps(("ok", render_bounded(reply[1])[0]))
except Exception as exc:
    data = pickle.dumps(("error", f"the result cannot be sent back ({type(exc).__name__}: {exc})"))
out.write(data)
out.flush()
"""


def check_isolatable(fn: Callable[..., Any]) -> None:
    """Raise :class:`ValueError` now if a child interpreter could never find ``fn``."""
    if "<locals>" in fn.__qualname__ or fn.__module__ == "__main__":
        raise ValueError(
            f"isolation='process' needs a module-level function in an importable module or file; "
            f"{fn.__module__}.{fn.__qualname__} is not"
        )


async def call_in_process(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Run ``fn(**kwargs)`` in a child interpreter and return its result; the child dies with the call.

    Raises :class:`ToolError` with the child's exception, or with how it died.
    """
    module = sys.modules.get(fn.__module__)
    payload = pickle.dumps(
        (fn.__module__, getattr(module, "__file__", None), fn.__qualname__, list(sys.path), kwargs)
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CHILD,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own process group: whatever the tool started dies with it
    )
    try:
        out, err = await proc.communicate(payload)
    finally:
        if proc.returncode is None:  # the call was given up (timeout, cancellation): end the child now
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            # ...and reap it here. Left to the event loop, the child's exit is noticed a few iterations
            # later, and an executor closes its loop sooner: the subprocess transport then stays open and
            # fails when it is collected ("Event loop is closed", an unraisable error in some later code).
            await asyncio.shield(proc.wait())
    if proc.returncode != 0 or not out:
        tail = err.decode("utf-8", errors="replace").strip().splitlines()[-3:]
        raise ToolError(f"the tool's process died (exit code {proc.returncode}): {' | '.join(tail)}")
    try:
        reply = plain_loads(out)
    except Exception as exc:  # a forged or truncated reply: whatever the child wrote, it is not obeyed
        raise ToolError(f"the tool's process sent back a reply that is not plain data: {exc}") from None
    match reply:
        case ("ok", value):
            return value
        case ("error", str(message)):
            raise ToolError(message)
    raise ToolError(f"the tool's process sent back a malformed reply of type {type(reply).__name__}")
