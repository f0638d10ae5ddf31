"""The unit-converter MCP server with a fixed, injected latency: the slow tool of the CPU rollout benchmark.

    python server.py --latency 0.5

``convert`` and ``list_units`` are the unit-converter example's own functions (same names, signatures and
docstrings, hence the same JSON schemas the tiny test model was taught with); ``convert`` answers after
sleeping ``--latency`` seconds, without blocking the server's loop, as a remote API would.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib.util
from pathlib import Path

from mcp.server.mcpserver import MCPServer

_SOURCE = Path(__file__).resolve().parents[3] / "examples" / "unit_converter" / "server.py"
_spec = importlib.util.spec_from_file_location("unit_converter_server", _SOURCE)
units = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(units)

mcp = MCPServer("units", log_level="WARNING")
LATENCY_S = 0.0


@mcp.tool()
@functools.wraps(units.convert)  # the schema comes from the wrapped signature and docstring
async def convert(*args, **kwargs) -> float:
    await asyncio.sleep(LATENCY_S)
    return units.convert(*args, **kwargs)


mcp.tool()(units.list_units)


def main() -> None:
    """Serve over stdio with the given latency."""
    global LATENCY_S
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each convert call takes")
    LATENCY_S = parser.parse_args().latency
    mcp.run()


if __name__ == "__main__":
    main()
