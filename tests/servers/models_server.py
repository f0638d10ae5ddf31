"""A FastMCP-style server whose tool takes pydantic models, as third-party Python servers write them: a model
parameter with a description, an optional model, a discriminated union, a list of models, a recursive model.

Its ``inputSchema`` is what the MCP SDK derives (``$ref`` into ``$defs``, ``anyOf`` with null, ``oneOf``);
the tool answers with what it received, as JSON, so a test sees each argument's type on the server's side.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

mcp = MCPServer("models", log_level="WARNING")


class Where(BaseModel):
    city: str
    days: int = 1


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool = True


class Node(BaseModel):
    name: str
    children: list[Node] = []


@mcp.tool()
def plan(
    where: Annotated[Where, Field(description="where to go")],
    pet: Annotated[Cat | Dog, Field(discriminator="kind")],
    backup: Where | None = None,
    stops: list[Where] | None = None,
    tree: Node | None = None,
    hourly: bool = False,
) -> str:
    """Plan a trip; answers with the arguments as the server received them."""
    return json.dumps(
        {
            "where": where.model_dump(),
            "pet": type(pet).__name__,
            "backup": backup and backup.model_dump(),
            "stops": [stop.city for stop in stops or []],
            "tree": tree and [child.name for child in tree.children],
            "hourly": hourly,
        }
    )


if __name__ == "__main__":
    mcp.run()
