"""A plain function for ``isolation="process"`` that imports nothing: what the child loads is ours."""

import sys


def tools_package_loaded() -> bool:
    """Whether the interpreter running this call has imported ``swift_rlfactory.tools``."""
    return "swift_rlfactory.tools" in sys.modules
