"""The agent environment's Python tool, down on rank 1 (the launcher's ``RANK``)."""

import os

from swift_rlfactory.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend
        b: second addend
    """
    if os.environ.get("RANK") == "1":
        raise RuntimeError("add is down on rank 1")
    return a + b
