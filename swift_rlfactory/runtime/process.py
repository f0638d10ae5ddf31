"""One call of a user function in a fresh interpreter, killed the moment the call is given up.

For code that may hang in native code or crash the interpreter (``@tool(isolation="process")``); the reply
is read as plain data only (docs/runtime.md).
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

from .plain_pickle import plain_loads


class ProcessCallFailed(Exception):
    """The call in the child failed: its exception (``Type: message``), or how the child died."""


_CHILD = r"""
import importlib, importlib.util, os, pickle, sys, threading, time
parent = os.getppid()
def orphaned():  # a trainer killed outright must not leave a spinning tool behind
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(1)
threading.Thread(target=orphaned, daemon=True).start()
module_name, module_file, qualname, path, kwargs, render = pickle.load(sys.stdin.buffer)
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
    plain_loads(data)
except Exception as exc:  # not plain data: send what the caller's render makes of it instead
    try:
        if render is None:
            raise exc
        render_module, _, render_name = render.partition(":")
        data = pickle.dumps(("ok", getattr(importlib.import_module(render_module), render_name)(reply[1])))
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


async def call_in_process(fn: Callable[..., Any], kwargs: dict[str, Any], render: str | None = None) -> Any:
    """Run ``fn(**kwargs)`` in a child interpreter and return its result; the child dies with the call.

    A result that is not plain data is sent as what ``render`` (``module:function``, imported in the child
    only then) returns for it, which must be plain data; without ``render`` it fails the call. Raises :class:`ProcessCallFailed` with the
    child's exception, or with how it died.
    """
    module = sys.modules.get(fn.__module__)
    payload = pickle.dumps(
        (fn.__module__, getattr(module, "__file__", None), fn.__qualname__, list(sys.path), kwargs, render)
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
        raise ProcessCallFailed(f"the process died (exit code {proc.returncode}): {' | '.join(tail)}")
    try:
        reply = plain_loads(out)
    except Exception as exc:  # a forged or truncated reply: whatever the child wrote, it is not obeyed
        raise ProcessCallFailed(f"the process sent back a reply that is not plain data: {exc}") from None
    match reply:
        case ("ok", value):
            return value
        case ("error", str(message)):
            raise ProcessCallFailed(message)
    raise ProcessCallFailed(f"the process sent back a malformed reply of type {type(reply).__name__}")
