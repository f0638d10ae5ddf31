"""The code example's reward: the final function against the row's hidden tests, run in the sandbox.

A tool-verified reward: it calls the environment's own ``run_python`` through ``trajectory.call_tool``,
so the tests run under the same sandbox, limits and executor as the model's calls. It returns the share of
tests passed; no code block, a solution that does not load, a timeout or a sandbox failure score 0.
"""

from __future__ import annotations

import re
import secrets

from swift_rlfactory.tools.calls import read_reply
from swift_rlfactory.trajectory import Trajectory

CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)

# The tests run after the solution is loaded in its own namespace with its output discarded; the file is
# removed first and the result line carries a fresh random marker, so printing a fake score does not work.
HARNESS = """\
import contextlib, io, json, os
os.remove(__file__)
solution, entry_point, tests, marker = {solution!r}, {entry_point!r}, json.loads({tests!r}), {marker!r}
namespace, passed = {{"__name__": "solution"}}, 0
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        exec(compile(solution, "solution.py", "exec"), namespace)
        function = namespace[entry_point]
    except BaseException:
        function = None
    for args, expected in tests if function else []:
        try:
            passed += json.dumps(function(*args)) == json.dumps(expected)  # no __eq__ tricks
        except Exception:
            pass
print(marker, passed, len(tests))
"""


def final_code(text: str) -> str | None:
    """The last fenced code block of the final reply, or ``None``."""
    blocks = CODE_BLOCK.findall(text)
    return blocks[-1] if blocks else None


def harness_program(solution: str, entry_point: str, tests: str, marker: str) -> str:
    """The program that loads ``solution`` and prints ``marker passed total``."""
    return HARNESS.format(solution=solution, entry_point=entry_point, tests=tests, marker=marker)


async def hidden_tests(trajectory: Trajectory, tool: str = "run_python") -> float:
    """Share of the row's hidden tests (``tests``, ``entry_point``) that the final function passes.

    The function is the last code block of the final reply's visible text (reasoning is drafts, not the
    answer); a final reply that writes a tool call, in any format, scores 0."""
    reply = read_reply(trajectory.final_response)
    solution = final_code(reply.visible)
    if solution is None or reply.writes_call:
        return 0.0
    row = trajectory.row
    marker = secrets.token_hex(8)
    record = await trajectory.call_tool(
        tool, {"code": harness_program(solution, row["entry_point"], row["tests"], marker)}
    )
    if record.error:
        return 0.0
    found = re.search(rf"^{marker} (\d+) (\d+)$", record.observation, re.MULTILINE)
    if not found:
        return 0.0
    passed, total = map(int, found.groups())
    return passed / total if total else 0.0
