"""Python tool of the end-to-end test environment."""

from swift_rlfactory.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend
        b: second addend
    """
    return a + b
