"""A unit-conversion MCP server: the tools of the ``unit_converter`` environment.

Written with the MCP SDK's ``MCPServer``: each typed, docstringed function below is a whole tool, and the
SDK derives its JSON schema from the signature. The environment starts it over stdio; to serve it to
several machines, run it over HTTP and point ``mcpServers`` at ``http://HOST:PORT/mcp``::

    python server.py                                                      # stdio
    python server.py --transport streamable-http --host 0.0.0.0 --port 8000
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

mcp = MCPServer("units", log_level="WARNING")

# Linear units: how many of the dimension's base unit (metre, kilogram) one unit is.
_LINEAR: dict[str, dict[str, float]] = {
    "length": {
        "mm": 0.001,
        "cm": 0.01,
        "m": 1.0,
        "km": 1000.0,
        "in": 0.0254,
        "ft": 0.3048,
        "yd": 0.9144,
        "mi": 1609.344,
    },
    "mass": {"mg": 1e-6, "g": 0.001, "kg": 1.0, "t": 1000.0, "oz": 0.028349523125, "lb": 0.45359237},
}

# Temperatures are affine, so they convert through kelvin: (to kelvin, from kelvin).
_TEMPERATURE: dict[str, tuple[Callable[[float], float], Callable[[float], float]]] = {
    "C": (lambda c: c + 273.15, lambda k: k - 273.15),
    "F": (lambda f: (f - 32) * 5 / 9 + 273.15, lambda k: (k - 273.15) * 9 / 5 + 32),
    "K": (lambda k: k, lambda k: k),
}

# Spellings a model is likely to use, mapped to the symbols above.
_ALIASES = {
    "millimeter": "mm",
    "centimeter": "cm",
    "meter": "m",
    "kilometer": "km",
    "inch": "in",
    "inches": "in",
    "foot": "ft",
    "feet": "ft",
    "yard": "yd",
    "mile": "mi",
    "milligram": "mg",
    "gram": "g",
    "kilogram": "kg",
    "tonne": "t",
    "ton": "t",
    "ounce": "oz",
    "pound": "lb",
    "lbs": "lb",
    "celsius": "C",
    "fahrenheit": "F",
    "kelvin": "K",
}


def _symbol(unit: str) -> str:
    """The canonical symbol of ``unit``: exact symbols first, then names (``Meters``, ``metre``, ``°C``)."""
    text = unit.strip().removeprefix("°")
    if text.upper() in _TEMPERATURE:
        return text.upper()
    name = text.lower().replace("metre", "meter")
    if name in _ALIASES:
        return _ALIASES[name]
    if name.endswith("s") and name[:-1] in _ALIASES:
        return _ALIASES[name[:-1]]
    return name


def _dimension(symbol: str) -> str | None:
    if symbol in _TEMPERATURE:
        return "temperature"
    return next((dim for dim, units in _LINEAR.items() if symbol in units), None)


@mcp.tool()
def convert(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a quantity between units of length, mass or temperature.

    Args:
        value: the quantity to convert, e.g. 12.5
        from_unit: its unit, e.g. "km", "lb", "F" (see list_units)
        to_unit: the unit wanted, of the same kind, e.g. "mi", "kg", "C"
    """
    source, target = _symbol(from_unit), _symbol(to_unit)
    dims = _dimension(source), _dimension(target)
    for unit, dim in zip((from_unit, to_unit), dims, strict=True):
        if dim is None:
            raise ToolError(f"unknown unit {unit!r}; call list_units for the supported ones")
    if dims[0] != dims[1]:
        raise ToolError(f"cannot convert {dims[0]} ({from_unit}) to {dims[1]} ({to_unit})")
    if dims[0] == "temperature":
        result = _TEMPERATURE[target][1](_TEMPERATURE[source][0](value))
    else:
        units = _LINEAR[dims[0]]
        result = value * units[source] / units[target]
    # Ten significant digits hide binary noise (0.30479999999999996 -> 0.3048) so answers match exactly.
    return float(f"{result:.10g}")


@mcp.tool()
def list_units() -> dict[str, list[str]]:
    """The unit symbols ``convert`` accepts, grouped by kind; only units of one kind convert to each other."""
    return {**{dim: list(units) for dim, units in _LINEAR.items()}, "temperature": list(_TEMPERATURE)}


def main() -> None:
    """Serve over stdio, or over HTTP when ``--transport`` says so."""
    parser = argparse.ArgumentParser(description="Unit-conversion MCP server.")
    parser.add_argument("--transport", choices=["stdio", "sse", "streamable-http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    if args.transport == "stdio":
        mcp.run()
    else:
        mcp.run(args.transport, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
