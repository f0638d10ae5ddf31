"""Tools that run each call in a child interpreter (``isolation="process"``), for the fault tests."""

import os
import time
from pathlib import Path

from pydantic import BaseModel

from swift_rlfactory.tools import tool


@tool(isolation="process")
def spin(pidfile: str) -> str:
    """Record the process id, then never return.

    Written whole, then renamed into place, so a reader that sees the file sees the whole id.
    """
    Path(pidfile + ".part").write_text(str(os.getpid()))
    os.replace(pidfile + ".part", pidfile)
    while True:
        time.sleep(0.1)


@tool(isolation="process")
def crash(code: int) -> str:
    """Kill the interpreter the hard way."""
    os._exit(code)


@tool(isolation="process")
def add_isolated(a: int, b: int) -> dict:
    """Answer from a child process, printing on the way (which must not corrupt the reply)."""
    print("noise on stdout")
    return {"sum": a + b, "pid": os.getpid()}


@tool(isolation="process")
def run_code(code: str) -> str:
    """Run model-written Python, the job isolation exists for; ``result`` is the answer."""
    scope: dict = {}
    exec(code, scope)
    return str(scope.get("result"))


class Reading(BaseModel):
    """A typed result, as a real tool returns one."""

    sensor: str
    value: float


@tool(isolation="process")
def read_sensor(sensor: str) -> Reading:
    """Answer with a pydantic model, which is no plain data and so travels rendered."""
    return Reading(sensor=sensor, value=21.5)


@tool(isolation="process")
def refuse(reason: str) -> str:
    """Fail the ordinary way, by raising."""
    raise ValueError(reason)
