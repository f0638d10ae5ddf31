"""Built-in tools, named in an environment's ``tools.builtin`` list, each with optional settings.

Each name maps to its settings model and to the provider that serves it; docs/tools.md ("Built-in tools").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from .base import ToolProvider
from .sandbox import RunPythonConfig, SandboxProvider

BuiltinEntry = str | dict[str, dict[str, Any] | None]

BUILTIN_TOOLS: dict[str, tuple[type[BaseModel], Callable[[Any], ToolProvider]]] = {
    "run_python": (RunPythonConfig, SandboxProvider),
}


def parse_builtin(entry: BuiltinEntry) -> tuple[str, BaseModel]:
    """``name`` or ``{name: settings}`` → (name, validated settings); ``ValueError`` naming what is wrong."""
    if isinstance(entry, str):
        name, settings = entry, {}
    elif isinstance(entry, dict) and len(entry) == 1:
        [(name, settings)] = entry.items()
        settings = settings or {}
    else:
        raise ValueError(f"expected a tool name or {{name: {{settings}}}}, got {entry!r}")
    if name not in BUILTIN_TOOLS:
        raise ValueError(f"unknown built-in tool {name!r}; available: {', '.join(sorted(BUILTIN_TOOLS))}")
    model = BUILTIN_TOOLS[name][0]
    try:
        return name, model.model_validate(settings)
    except ValidationError as exc:
        details = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"{name}: {details}") from None


def builtin_providers(entries: Sequence[BuiltinEntry]) -> list[ToolProvider]:
    """One provider per entry, each with its settings."""
    providers = []
    for entry in entries:
        name, settings = parse_builtin(entry)
        providers.append(BUILTIN_TOOLS[name][1](settings))
    return providers
