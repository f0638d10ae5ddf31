"""Python functions as tools: ``@tool`` on a typed, docstringed function is the whole tool.

How the schema is derived and arguments validated: docs/tools.md ("Python tools"); how calls run:
docs/runtime.md.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, get_type_hints

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from swift_rlfactory.runtime.calls import Isolation, UserCode, cancelled_by_caller
from swift_rlfactory.runtime.process import ProcessCallFailed, check_isolatable
from swift_rlfactory.runtime.threads import SYNC_POOL
from swift_rlfactory.runtime.user_code import import_target

from .base import Tool, ToolError, ToolSpec, TransportError, stray_cancellation
from .episode_state import NO_EPISODE, current_state, wants_state
from .observation import render

MAX_ITEMS = 10_000
"""Items of a returned generator or iterator that are read; the rest are left unread and the generator closed."""


class PythonTool:
    """A :class:`Tool` backed by a Python callable (sync or async).

    ``isolation="process"`` runs every call of a synchronous function in a child interpreter that a
    timeout kills; the default ``"thread"`` runs it on :data:`~swift_rlfactory.runtime.threads.SYNC_POOL`.
    Parameters annotated :data:`~.episode_state.EpisodeState` (:attr:`state_params`) receive the
    trajectory's episode state and are left out of the schema.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        description: str | None = None,
        isolation: Isolation = "thread",
    ):
        if isolation not in ("thread", "process"):
            raise ValueError(f"isolation must be 'thread' or 'process', not {isolation!r}")
        if isolation == "process":
            if inspect.iscoroutinefunction(fn):
                raise ValueError(f"isolation='process' is for synchronous functions; {fn.__name__} is async")
            check_isolatable(fn)
        self.fn = fn
        self.isolation = isolation
        hints = get_type_hints(fn, include_extras=True)
        self.state_params = tuple(name for name, hint in hints.items() if wants_state(hint))
        if self.state_params and isolation == "process":  # a child's changes to the state would be lost
            raise ValueError(f"{fn.__name__} takes the episode state, so it cannot use isolation='process'")
        doc = docstring_parser.parse(inspect.getdoc(fn) or "")
        descriptions = {p.arg_name: p.description for p in doc.params}
        self._arguments_model = _arguments_model(fn, descriptions, skip=set(self.state_params))
        summary = "\n\n".join(part for part in (doc.short_description, doc.long_description) if part)
        schema = self._arguments_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        self.spec = ToolSpec(name=name or fn.__name__, description=description or summary, parameters=schema)
        self._code = UserCode(
            self.spec.name,
            kind="tool",
            pool=SYNC_POOL,
            own_loop=False,  # async tools share the executor's loop with what they keep between calls
            isolation=isolation,
            render=f"{__name__}:rendered",
            max_stuck=None,
            convert=drained,
        )

    async def call(self, arguments: dict[str, Any]) -> Any:
        """Validate ``arguments`` against the signature, then run the function."""
        try:
            parsed = self._arguments_model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolError(f"invalid arguments for {self.spec.name}: {_short(exc)}") from None
        kwargs = {key: getattr(parsed, key) for key in type(parsed).model_fields}
        if self.state_params:
            state = current_state.get()
            if state is NO_EPISODE:
                raise ToolError(
                    f"{self.spec.name} needs its episode's state, and this call runs in no episode"
                )
            kwargs.update(dict.fromkeys(self.state_params, state))
        try:
            return await self._code.call(self.fn, **kwargs)
        except ProcessCallFailed as exc:
            raise ToolError(str(exc)) from None
        except (ToolError, TransportError):  # a tool may ask for a retry by raising TransportError
            raise
        except ValidationError as exc:  # pydantic inside the tool: its own summary, without the URL lines
            raise ToolError(f"{exc.title}: {_short(exc)}") from exc
        except Exception as exc:  # a bug or a refusal inside user code is the model's observation
            raise ToolError(_named(exc)) from exc
        except (SystemExit, KeyboardInterrupt) as exc:  # an async tool's sys.exit(): on the event loop
            raise ToolError(_named(exc)) from None  # it would stop it for good
        except asyncio.CancelledError:
            if cancelled_by_caller():  # a timeout or a caller that gave up: the call must end
                raise
            raise stray_cancellation(self.spec.name) from None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Decorated functions stay callable as plain functions."""
        return self.fn(*args, **kwargs)


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    isolation: Isolation = "thread",
):
    """Decorator turning a function into a :class:`PythonTool`; bare, or with ``name=``, ``description=``,
    ``isolation="process"`` (each call in a child interpreter, killed on timeout)."""

    def wrap(f: Callable[..., Any]) -> PythonTool:
        return PythonTool(f, name=name, description=description, isolation=isolation)

    return wrap(fn) if fn is not None else wrap


def drained(value: Any) -> Any:
    """A returned generator or other iterator read into a list of at most :data:`MAX_ITEMS` items (a last
    item says so when more were left); anything else as it is. It runs where the tool ran: the items are
    the tool's own code."""
    if isinstance(value, AsyncIterator):
        raise TypeError("the tool returned an async iterator, which is not read; return its items instead")
    if not isinstance(value, Iterator) or isinstance(value, str | bytes):
        return value
    items = list(itertools.islice(value, MAX_ITEMS + 1))
    if len(items) > MAX_ITEMS:
        items[MAX_ITEMS:] = [f"... [the tool's iterator was stopped after {MAX_ITEMS} items]"]
    close = getattr(value, "close", None)
    if close is not None:
        close()
    return items


def rendered(value: Any) -> str:
    """What an isolated tool's child sends back for a result that is not plain data: its observation text."""
    return render(drained(value))


def _arguments_model(
    fn: Callable[..., Any], descriptions: dict[str, str | None], skip: set[str]
) -> type[BaseModel]:
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.name in skip:
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, Field(default, description=descriptions.get(param.name)))
    return create_model(
        f"{fn.__name__}_arguments",
        __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True),
        **fields,
    )


def _named(exc: BaseException) -> str:
    """``Type: message`` of what the tool raised, even for an exception whose ``__str__`` raises."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return f"{type(exc).__name__} (its message cannot be printed)"


def _short(exc: ValidationError) -> str:
    """``loc: msg`` per error: what the model needs, without pydantic's input echo and documentation URLs."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())


def load_python_tools(ref: str, base_dir: Path) -> list[Tool]:
    """Load tools from ``module:attr``, ``path/to/file.py:attr`` or a whole module/file (``attr`` omitted).

    ``attr`` may name a :class:`PythonTool`, a plain function (wrapped on the fly) or a list of either.
    Without ``attr`` every :class:`PythonTool` defined at module level is taken. Relative file paths are
    resolved against ``base_dir`` (the environment YAML's folder).
    """
    target, _, attr = ref.partition(":")
    module = import_target(target, base_dir)
    if not attr:
        found = [v for v in vars(module).values() if isinstance(v, PythonTool)]
        if not found:
            raise ValueError(f"{ref!r} defines no @tool functions")
        return list(found)
    if not hasattr(module, attr):
        raise ValueError(f"{target!r} has no attribute {attr!r}")
    value = getattr(module, attr)
    items = value if isinstance(value, (list, tuple)) else [value]
    tools: list[Tool] = []
    for item in items:
        if isinstance(item, PythonTool):
            tools.append(item)
        elif callable(item):
            tools.append(PythonTool(item))
        else:
            raise ValueError(f"{ref!r} is not a function or tool: {item!r}")
    return tools
