"""``run_python``: the built-in code interpreter tool, one fresh sandbox per call, or with ``persistent:
true`` one long-lived sandboxed interpreter per trajectory.

How it is enabled, what the model sees and what start-up checks: docs/tools.md ("run_python").
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from pydantic import Field

from ..base import Tool, ToolError, ToolSpec
from ..episode_state import current_episode
from .runner import SANDBOX_UID, Sandbox, SandboxLimits, SandboxResult, SandboxUnavailable
from .session import InterpreterPool

logger = logging.getLogger(__name__)

MAX_CODE_BYTES = 256 * 1024

# Runs inside the sandbox: the program arrives on stdin and is saved as /tmp/main.py, so tracebacks show
# its lines; stdin is then /dev/null, and the traceback starts at the program's own frame.
_BOOTSTRAP = """\
import os, sys, traceback
src = sys.stdin.buffer.read()
with open("/tmp/main.py", "wb") as f:
    f.write(src)
fd = os.open(os.devnull, os.O_RDONLY); os.dup2(fd, 0); os.close(fd)
sys.argv = ["/tmp/main.py"]
try:
    code = compile(src, "/tmp/main.py", "exec")
    exec(code, {"__name__": "__main__", "__file__": "/tmp/main.py", "__builtins__": __builtins__})
except SystemExit:
    raise
except BaseException as e:
    tb = e.__traceback__.tb_next if isinstance(e, Exception) and e.__traceback__ else e.__traceback__
    traceback.print_exception(type(e), e, tb)
    sys.exit(1)
"""

DESCRIPTION = (
    "Run a Python 3 program in a fresh sandbox and return what it prints (stdout, then stderr). "
    "print() every value you want to see. No network; only /tmp is writable and nothing is kept between "
    "calls. Limits: {timeout_s:g} s, {memory_mb} MB."
)
PERSISTENT_DESCRIPTION = (
    "Run Python 3 code in this conversation's own interpreter and return what it prints (stdout, then "
    "stderr), then the value of a final expression. Variables, imports and files in /tmp are kept between "
    "calls. No network; only /tmp is writable. Limits per call: {timeout_s:g} s, {memory_mb} MB."
)


class RunPythonConfig(SandboxLimits):
    """Settings of ``run_python``: the sandbox limits plus the interpreter."""

    python: str | None = Field(
        default=None,
        description="interpreter inside the sandbox; default: this one, else /usr/local/bin or /usr/bin python3",
    )
    persistent: bool = Field(
        default=False, description="one interpreter per trajectory, kept between its calls, killed at its end"
    )
    max_live: int = Field(default=64, gt=0, description="persistent: interpreters alive at once")
    max_live_wait_s: float = Field(
        default=30.0, ge=0, description="persistent: how long a new trajectory waits for a free interpreter"
    )
    session_cpu_s: int = Field(
        default=600, gt=0, description="persistent: CPU seconds of one interpreter over its whole life"
    )


class RunPythonTool:
    """The ``run_python`` tool: validates the code, runs it in a :class:`Sandbox`, renders the result."""

    def __init__(self, config: RunPythonConfig, python: str, sandbox: Sandbox | None = None):
        self.config = config
        self.python = python
        self.sandbox = sandbox or Sandbox(config)
        # the executor's per-call timeout, when it reads one: the sandbox's own limit plus time to clean up
        self.timeout_s = config.timeout_s + 5
        self.spec = ToolSpec(
            name="run_python",
            description=DESCRIPTION.format(timeout_s=config.timeout_s, memory_mb=config.memory_mb),
            parameters={
                "type": "object",
                "properties": {"code": {"type": "string", "description": "the whole Python program"}},
                "required": ["code"],
            },
        )

    async def call(self, arguments: dict[str, Any]) -> str:
        """Run ``arguments["code"]``; raises :class:`ToolError` (with the output) unless it exits 0."""
        data = _code(arguments).encode("utf-8", errors="replace")
        result = await self.sandbox.run([self.python, "-c", _BOOTSTRAP], stdin=data)
        text = render_result(result)
        if not result.ok:
            raise ToolError(f"{failure(result, self.config)}\n{text}".rstrip())
        return text


class PersistentRunPythonTool(RunPythonTool):
    """``run_python`` with ``persistent: true``: each trajectory's calls run in its own interpreter of
    ``pool``, found by the trajectory id the executor runs the call under."""

    per_trajectory = True  # its results depend on the trajectory's earlier calls: never cached

    def __init__(self, config: RunPythonConfig, python: str, pool: InterpreterPool):
        super().__init__(config, python, pool.sandbox)
        self.pool = pool
        self.timeout_s = config.timeout_s + config.max_live_wait_s + 5  # waiting for a place counts too
        self.spec = ToolSpec(
            name=self.spec.name,
            description=PERSISTENT_DESCRIPTION.format(timeout_s=config.timeout_s, memory_mb=config.memory_mb),
            parameters={
                "type": "object",
                "properties": {"code": {"type": "string", "description": "the Python code to run"}},
                "required": ["code"],
            },
        )

    async def call(self, arguments: dict[str, Any]) -> str:
        """Run ``arguments["code"]`` in this trajectory's interpreter; raises :class:`ToolError` when it
        raised, called exit with a non-zero code, or the interpreter had to be restarted."""
        status, result = await self.pool.run(current_episode.get(), _code(arguments))
        text = render_result(result)
        if status == "error":
            raise ToolError(f"the code raised an exception; the interpreter keeps its variables\n{text}")
        if status != "ok":
            raise ToolError(
                f"the code called sys.{status.replace(' ', '(', 1)}); the interpreter is kept\n{text}"
            )
        return text


def _code(arguments: dict[str, Any]) -> str:
    """The ``code`` argument, checked; raises :class:`ToolError` saying what is wrong."""
    code = arguments.get("code")
    if not isinstance(code, str) or not code.strip():
        raise ToolError("run_python needs a 'code' argument: the Python program as a string")
    if extra := sorted(set(arguments) - {"code"}):
        raise ToolError(f"run_python takes only 'code'; unexpected: {', '.join(extra)}")
    size = len(code.encode("utf-8", errors="replace"))
    if size > MAX_CODE_BYTES:
        raise ToolError(f"the program is {size} bytes; at most {MAX_CODE_BYTES} are accepted")
    return code


def render_result(result: SandboxResult) -> str:
    """stdout, then stderr under a marker; ``(no output)`` when both are empty."""
    parts = [result.stdout.rstrip("\n")] if result.stdout.strip() else []
    if result.stderr.strip():
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    return "\n".join(parts) if parts else "(no output)"


def failure(result: SandboxResult, limits: SandboxLimits) -> str:
    """One line saying how a run failed, naming the limit it hit."""
    if result.timed_out:
        return f"the program was stopped after {limits.timeout_s:g} s (wall-clock limit)"
    if result.output_truncated:
        return f"the program was stopped: it printed more than {limits.max_output_bytes} bytes"
    name = result.signal_name
    if name == "SIGXCPU" or (name == "SIGKILL" and result.duration_s >= limits.cpu_s):
        return f"the program was stopped after {limits.cpu_s} s of CPU time"
    if name:
        return f"the program was killed by {name}"
    return f"the program exited with code {result.exit_code}"


class SandboxProvider:
    """Provider of ``run_python``: starting it proves the sandbox works here (or raises saying why not).

    With ``persistent: true`` it is a per-trajectory backend (``PerTrajectory``): the episode lifecycle calls
    :meth:`end` with each trajectory id at its teardown, which stops that trajectory's interpreter.
    """

    def __init__(self, config: RunPythonConfig | None = None, name: str = "builtin"):
        self.name = name
        self.config = config or RunPythonConfig()
        self.per_trajectory = self.config.persistent
        self.pool: InterpreterPool | None = None

    async def start(self) -> list[Tool]:
        """Find an interpreter that runs in the sandbox and return the tool."""
        sandbox = Sandbox(self.config)
        python = await self._interpreter(sandbox)
        if not self.config.persistent:
            return [RunPythonTool(self.config, python, sandbox)]
        cfg = self.config
        self.pool = InterpreterPool(
            sandbox, python, cfg, cfg.max_live, cfg.max_live_wait_s, cfg.session_cpu_s
        )
        return [PersistentRunPythonTool(cfg, python, self.pool)]

    def begin(self, key: str) -> None:
        """Trajectory ``key`` is live; its interpreter starts at its first call."""

    async def end(self, key: str) -> None:
        """Stop the interpreter of trajectory ``key`` (its episode was torn down)."""
        if self.pool is not None:
            await self.pool.release(key)

    async def close(self) -> None:
        """Stop every persistent interpreter (a fresh sandbox per call is gone when its call returns)."""
        if self.pool is not None:
            await self.pool.close()

    async def _interpreter(self, sandbox: Sandbox) -> str:
        sandbox.command([])  # bwrap or setpriv missing: say so once, before trying interpreters
        if self.config.python:
            await _probe(sandbox, self.config.python)
            return self.config.python
        # Run as root, the sandbox is uid nobody, which cannot read an interpreter under /root (pyenv).
        candidates = list(dict.fromkeys([sys.executable, "/usr/local/bin/python3", "/usr/bin/python3"]))
        errors = []
        for python in candidates:
            try:
                await _probe(sandbox, python)
            except SandboxUnavailable as exc:
                errors.append(str(exc))
                continue
            if python != sys.executable:
                logger.warning(
                    "run_python: %s does not run in the sandbox (uid %d cannot read it?); using %s",
                    sys.executable,
                    SANDBOX_UID,
                    python,
                )
            return python
        raise SandboxUnavailable(
            "run_python: no Python interpreter runs in the sandbox (set tools.builtin run_python.python):\n"
            + "\n".join(f"  {e}" for e in errors)
        )


async def _probe(sandbox: Sandbox, python: str) -> None:
    await sandbox.probe([python, "-c", "print('sandbox-ok')"], "sandbox-ok")
