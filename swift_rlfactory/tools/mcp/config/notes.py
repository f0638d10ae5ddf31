"""What reading a config file warns about, told once per file."""

from __future__ import annotations

import logging

from pydantic import ValidationInfo

logger = logging.getLogger(__package__)

# What was warned about, by the file it is in: a file is read anew by each load (the dataset's check, then
# the run), and each of its problems is told once; the same problem in another file is told again.
_warned: set[tuple[str, str]] = set()


def warn_once(info: ValidationInfo, level: int, message: str) -> None:
    """Log ``message`` unless it was logged for the same config file before; the file is the validation
    context's ``path`` (an ``mcp_config`` file) or ``source`` (the environment file of an inline block)."""
    context = info.context or {}
    where = str(context.get("path") or context.get("source") or "")
    if (where, message) not in _warned:
        _warned.add((where, message))
        logger.log(level, message)
