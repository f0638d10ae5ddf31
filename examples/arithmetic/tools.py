"""The calculator of ``swift_rlfactory/bundled/calculator``, with a result that says what to do next.

Base Qwen2.5-Coder-0.5B-Instruct usually writes the right expression but, given a bare number back, calls
the calculator again with the same expression until it runs out of turns (12 of 16 held-out problems
had the right result in an observation, none was answered: CPU probe in benchmarks/rl_from_base/RESULTS.md).
The observation therefore repeats the protocol's last step. It gives nothing away: the model still has
to choose the expression, and whether this result is the final one.
"""

from __future__ import annotations

# The module, not its tool: a tool imported here would be loaded twice from this file.
from swift_rlfactory.bundled.calculator import tools as calculator
from swift_rlfactory.tools import tool


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression and return the result.

    Args:
        expression: numbers with + - * / // % ** and parentheses, e.g. "(3 + 4) * 12".
    """
    value = calculator.calculate(expression)
    return f"{value}\nIf this is the final result, reply with <answer>{value}</answer>."
