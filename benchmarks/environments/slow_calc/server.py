"""A calculator MCP server with a fixed, injected latency: the tool of the rollout benchmarks.

    python server.py --latency 0.5

Each call sleeps ``--latency`` seconds (without blocking the server's loop, as a remote API would) and
then evaluates the expression with the calculator example's safe evaluator.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from swift_rlfactory.runtime.user_code import import_target
from swift_rlfactory.tools import ToolError as LocalToolError

HERE = Path(__file__).resolve().parent
local_calculate = import_target("../../../examples/calculator/tools.py", HERE).calculate

mcp = MCPServer("slow-calculator", log_level="WARNING")
LATENCY_S = 0.0


@mcp.tool()
async def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression and return the result.

    Args:
        expression: numbers with + - * / // % ** and parentheses, e.g. "(3 + 4) * 12".
    """
    await asyncio.sleep(LATENCY_S)
    try:
        return local_calculate.fn(expression)
    except LocalToolError as exc:
        raise ToolError(str(exc)) from None


def main() -> None:
    """Serve over stdio with the given latency."""
    global LATENCY_S
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each call takes")
    LATENCY_S = parser.parse_args().latency
    mcp.run()


if __name__ == "__main__":
    main()
