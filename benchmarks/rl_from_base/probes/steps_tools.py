"""The calculator of ``examples/arithmetic/tools.py`` with an observation that invites another step.

``env_hint.yaml``'s result ends "If this is the final result, reply with <answer>N</answer>", and the
policy answers after one call: on GSM-Symbolic it often answers one step of a multi-step story. This
variant leaves the choice open. A CPU probe only (``env_steps.yaml``, benchmarks/rl_from_base/RESULTS.md, "CPU probes"): the
base model called again and again instead of answering, so it is not a training environment.
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
    return f"{value}\nIf this answers the question, reply with <answer>{value}</answer>. If a step is left, call calculate again."
