"""A stdio MCP server whose tool names no function-calling API takes as they are.

Tools (each echoes its ``text``): ``ns.tool/with:odd chars`` (a dot, a slash, a colon, a space), ``t>x``
(a ``>`` would end the XML call format's ``<function=...>`` tag), two names longer than 64 characters that
share their first 64, and ``plain``.
"""

from __future__ import annotations

import logging

from mcp.server.mcpserver import MCPServer

LONG = "a_very_long_tool_name_that_goes_on_and_on_past_the_limit_of_sixty_four_characters"
NAMES = ("ns.tool/with:odd chars", "t>x", LONG, LONG + "_too", "plain")

logging.getLogger("mcp").setLevel(logging.ERROR)  # the SDK warns about each odd name; that is the point
mcp = MCPServer("names", log_level="WARNING")


def _echo(text: str) -> str:
    return text


for _name in NAMES:
    mcp.tool(name=_name, description=f"echo, named {_name}")(_echo)

if __name__ == "__main__":
    mcp.run()
