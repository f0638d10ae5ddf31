"""``run_python`` for word problems, with a result that says what to do next (tools.py does the same for the
calculator).

The program runs in the sandbox of the built-in ``run_python`` (bubblewrap: no network, read-only root,
its own /tmp), one fresh sandbox per call. What it printed comes back followed by the protocol's last
step, "If this is the final result, reply with <answer>N</answer>", N being the last line printed: base
Qwen2.5-Coder-0.5B-Instruct, given a bare result, calls the tool again instead of answering (the
calculator's CPU probe in benchmarks/rl_from_base/RESULTS.md). It gives nothing away: the model still has
to write the program, and to judge whether its result answers the question. A program that fails comes
back as the failed call's observation (its traceback), with no hint.
"""

from __future__ import annotations

from swift_rlfactory.tools import Tool, tool
from swift_rlfactory.tools.sandbox.tool import RunPythonConfig, SandboxProvider

NO_OUTPUT = "(no output)"  # what the built-in tool returns for a program that printed nothing
LIMITS = RunPythonConfig(timeout_s=5, cpu_s=5, memory_mb=512, max_processes=32)
_started: list[Tool] = []  # the built-in tool, once found; not a task: training and eval run other loops


async def _interpreter() -> Tool:
    """The built-in tool, started on first use (its start-up proves the sandbox runs here). Calls that
    race to be first each start one; any of them will do."""
    if not _started:
        _started[:] = await SandboxProvider(LIMITS).start()
    return _started[0]


@tool
async def run_python(code: str) -> str:
    """Run a Python 3 program in a fresh sandbox and return what it prints.

    Args:
        code: the whole program; print() the answer, e.g. "apples = 3 * 4\\nprint(apples + 2)".
    """
    printed = await (await _interpreter()).call({"code": code})
    if printed == NO_OUTPUT:
        return f"{NO_OUTPUT}: print() the result"
    last = printed.strip().splitlines()[-1].strip()
    return f"{printed}\nIf this is the final result, reply with <answer>{last}</answer>."
