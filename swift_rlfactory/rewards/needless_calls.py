"""A process reward that charges the tool calls made after the answer was already in an observation.

Verified against the tools' results: a verifier ``(observation, answers) -> bool`` (by default
:func:`contains_answer`) finds the first turn whose observations hold a reference answer, and every call of
a later turn is charged. Rules and an example: docs/rewards.md#needless-calls.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from swift_rlfactory.runtime.user_code import import_target

from ..trajectory import Trajectory
from .process import calls_by_turn
from .rules import normalize_answer

Verifier = Callable[[str, list[str]], bool]
"""``verifier(observation, answers)``: whether the observation text holds one of the reference answers."""


def contains_answer(observation: str, answers: Sequence[str]) -> bool:
    """Whether one of ``answers``, normalised as EM normalises, appears in the normalised observation as
    whole words ("Paris" in "Doc 1(Title: Paris) ...", not "Par" in "Paris")."""
    text = f" {normalize_answer(observation)} "
    return any(f" {gold} " in text for gold in map(normalize_answer, answers) if gold)


def answer_turn(trajectory: Trajectory, verifier: Verifier = contains_answer) -> int | None:
    """The 0-based assistant turn of the first call that succeeded and whose observation the verifier
    accepts; ``None`` when none does, or the row has no reference answer."""
    answers = trajectory.golden_answers
    if not answers:
        return None
    for turn, calls in sorted(calls_by_turn(trajectory).items()):
        if any(not c.get("error") and verifier(c.get("observation") or "", answers) for c in calls):
            return turn
    return None


def needless_by_turn(trajectory: Trajectory, verifier: Verifier = contains_answer) -> list[int]:
    """Per assistant turn, the calls it made after the answer's turn (calls beside the one that found the
    answer, in the same turn, were made before its observation came back: not counted)."""
    seen = answer_turn(trajectory, verifier)
    by_turn = calls_by_turn(trajectory)
    turns = range(len(trajectory.assistant_turns))
    return [len(by_turn.get(i, [])) if seen is not None and i > seen else 0 for i in turns]


def needless_calls(
    trajectory: Trajectory, verifier: Verifier | str | None = None, penalty: float = 1.0
) -> float:
    """Minus ``penalty`` per needless call, at least -1; 0 for a trajectory without one. ``verifier``: a
    function, or a ``module:function`` / ``file.py:function`` (a file from the working directory; named by
    the registered reward, from the environment's folder: :func:`build`)."""
    count = sum(needless_by_turn(trajectory, _verifier(verifier)))
    return max(-1.0, -penalty * count)


def turn_needless_calls(
    trajectory: Trajectory, verifier: Verifier | str | None = None, penalty: float = 1.0
) -> list[float]:
    """Per assistant turn: minus ``penalty`` per needless call of that turn, at least -1; 0 for the
    others."""
    return [max(-1.0, -penalty * n) for n in needless_by_turn(trajectory, _verifier(verifier))]


class NeedlessArgs(BaseModel):
    """The ``args`` of a needless-call reward term."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    verifier: str | None = None  # module:function or file.py:function; None: contains_answer
    penalty: float = Field(default=1.0, ge=0)


def build(per_turn: bool) -> Callable[[dict[str, Any], Any, Path], Callable[..., Any]]:
    """``RewardDef.build`` for :func:`needless_calls` (``per_turn`` False) or :func:`turn_needless_calls`:
    the args validated and the verifier imported when the environment loads, a file from its folder."""

    def make(args: dict[str, Any], cache: Any, base_dir: Path) -> Callable[..., Any]:
        checked = NeedlessArgs.model_validate(args)
        fn = turn_needless_calls if per_turn else needless_calls
        verifier = load_verifier(checked.verifier, base_dir) if checked.verifier else contains_answer
        return functools.partial(fn, verifier=verifier, penalty=checked.penalty)

    return make


def load_verifier(target: str, base_dir: Path = Path(".")) -> Verifier:
    """The function a ``module:function`` or ``file.py:function`` names (a file from ``base_dir``); raises
    ``ValueError`` when it names none."""
    module, sep, attr = target.partition(":")
    fn = getattr(import_target(module, base_dir), attr, None) if sep and attr else None
    if not callable(fn):
        raise ValueError(f"verifier {target!r}: not a module:function or file.py:function")
    return fn


@functools.lru_cache(maxsize=32)
def _named_verifier(target: str) -> Verifier:
    return load_verifier(target)


def _verifier(verifier: Verifier | str | None) -> Verifier:
    if verifier is None:
        return contains_answer
    return _named_verifier(verifier) if isinstance(verifier, str) else verifier
