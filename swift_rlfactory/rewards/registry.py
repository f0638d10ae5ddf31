"""The reward registry: an environment's reward spec as a weighted sum of named components.

Resolves each term (a built-in, a registered name, ``module:function``), runs user terms through
:class:`~swift_rlfactory.runtime.calls.UserCode`, each on its own copy of the trajectory, and stores scores,
per-turn scores and errors on it; the contract and every fault rule are in docs/rewards.md.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from swift_rlfactory.data.answers import missing, reference_answers
from swift_rlfactory.runtime import blocking
from swift_rlfactory.runtime.calls import CallStuck, UserCode, cancelled_by_caller, yields
from swift_rlfactory.runtime.user_code import import_target

from ..tools.cache import ToolCache
from ..trajectory import Trajectory
from . import needless_calls, process, rules
from .judge import Judge
from .metrics import JudgeStats
from .terms import DEFAULT_TIMEOUT_S, RewardTerm

logger = logging.getLogger(__name__)

RewardFn = Callable[..., Any]
"""``fn(trajectory, **args)`` returning a float, a list of floats (one per assistant turn) or an awaitable
of either."""

GOLDEN_ANSWERS = "golden_answers"
CAUSES = ("error", "timeout", "non_finite", "wrong_length", "missing_field")


@dataclass(frozen=True)
class RewardDef:
    """A reward function and what the registry knows about it.

    Attributes:
        fn: the function.
        per_turn: it returns one score per assistant turn.
        requires: dataset-row fields it cannot score without (``golden_answers`` also accepts the
            ``solution``/``answer``/``answers`` columns that :attr:`Trajectory.golden_answers` reads).
        inline: fast, bounded code of ours that never blocks, called (and awaited) on the caller's event
            loop; user code runs in :class:`~swift_rlfactory.runtime.calls.UserCode` instead.
        build: for a reward with state (a model judge): ``build(args, cache, base_dir) -> fn`` makes the
            scoring callable from the term's ``args`` (validated there, a relative ``${file:...}`` taken
            from ``base_dir``, the environment's folder) and the environment's cache. The callable
            may also have ``start(trajectory, group_size)`` (begin scoring a finished trajectory early),
            ``start_batch(trajectories)``, ``drain_metrics() -> dict`` and ``close()``.
    """

    fn: RewardFn | None = None
    per_turn: bool = False
    requires: tuple[str, ...] = ()
    inline: bool = False
    build: Callable[[dict[str, Any], ToolCache | None, Path], RewardFn] | None = None


_REGISTRY: dict[str, RewardDef] = {
    "em": RewardDef(rules.em, requires=(GOLDEN_ANSWERS,), inline=True),
    "f1": RewardDef(rules.f1, requires=(GOLDEN_ANSWERS,), inline=True),
    "format": RewardDef(rules.format_reward, inline=True),
    "tool_use": RewardDef(rules.tool_use, inline=True),
    "turn_tool_success": RewardDef(process.turn_tool_success, per_turn=True, inline=True),
    "turn_format": RewardDef(process.turn_format, per_turn=True, inline=True),
    "judge": RewardDef(build=Judge.from_args, inline=True),  # it only awaits its own private loop
    "needless_calls": RewardDef(build=needless_calls.build(False), requires=(GOLDEN_ANSWERS,)),
    "turn_needless_calls": RewardDef(build=needless_calls.build(True), per_turn=True),
}


def register_reward(
    name: str, *, per_turn: bool = False, requires: Sequence[str] = ()
) -> Callable[[RewardFn], RewardFn]:
    """Decorator registering a reward function under ``name``.

    ``per_turn`` says it returns one score per assistant turn; ``requires`` names the dataset-row fields
    it needs, so rows without them are counted as ``missing_field`` instead of scoring a silent 0.
    """

    def wrap(fn: RewardFn) -> RewardFn:
        _REGISTRY[name] = RewardDef(fn, per_turn=per_turn, requires=tuple(requires))
        return fn

    return wrap


def resolve_reward(name: str, base_dir: Path = Path(".")) -> RewardDef:
    """A registered name, or ``module:function`` / ``path/file.py:function`` resolved against ``base_dir``."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    target, sep, attr = name.partition(":")
    if not sep or not attr:
        known = ", ".join(sorted(_REGISTRY))
        raise ValueError(f"unknown reward {name!r}: use one of {known} or 'module:function'")
    fn = getattr(import_target(target, base_dir), attr, None)
    if not callable(fn):
        raise ValueError(f"reward {name!r}: {target!r} has no function {attr!r}")
    return RewardDef(fn)


@dataclass
class RewardComponent:
    """A resolved reward term (see :class:`~swift_rlfactory.rewards.terms.RewardTerm` for the fields)."""

    name: str
    fn: RewardFn
    weight: float
    args: dict[str, Any] = field(default_factory=dict)
    per_turn: bool = False
    requires: tuple[str, ...] = ()
    inline: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    fallback: float = 0.0
    workers: UserCode | None = None
    """Where user code runs (``None`` for ``inline`` rewards)."""


@dataclass
class _Score:
    value: float
    turns: list[float] | None = None
    error: str | None = None


class NotAScore(TypeError):
    """A reward returned a value ``float()`` cannot read; ``__cause__`` is what ``float()`` raised."""


def score_value(raw: Any) -> float | list[float]:
    """What a reward returned, read as its score: one float per turn for a list, a tuple or a 1-d array
    (per-turn scores), else one float. Raises :class:`NotAScore` saying what was returned.

    It runs where the reward ran (:class:`~swift_rlfactory.runtime.calls.UserCode`' ``convert``):
    ``float()`` calls the value's own ``__float__``, which is user code like the reward.

    >>> score_value((1, "0.5"))
    [1.0, 0.5]
    """
    try:
        if isinstance(raw, list | tuple) or getattr(raw, "ndim", 0) == 1:
            return [float(v) for v in raw]
        return float(raw)
    except Exception as exc:  # TypeError, ValueError, OverflowError (10**400), a raising __float__
        shown = repr(raw[:80]) if isinstance(raw, str) else f"a {type(raw).__name__}"  # repr may be user code
        raise NotAScore(
            f"returned {shown}, not a number (float() raised {type(exc).__name__}: {exc}); a reward "
            "returns a float, or a list of floats for per-turn scores"
        ) from exc


class RewardSpec:
    """A weighted sum of reward components, scored concurrently and fault-tolerantly.

    Attributes:
        errors: component scores that fell back, over the spec's life.
        failures: the same, by cause (``timeout``, ``non_finite``, ...).
    """

    def __init__(
        self, terms: Sequence[RewardTerm], base_dir: Path = Path("."), cache: ToolCache | None = None
    ):
        self.components: list[RewardComponent] = []
        for i, term in enumerate(terms):
            if term.name == "total":
                raise ValueError(f"reward[{i}].name: 'total' is the weighted sum's own key")
            try:
                found = resolve_reward(term.name, base_dir)
            except ValueError as exc:
                raise ValueError(f"reward[{i}].name: {exc}") from None
            except Exception as exc:  # the user's file fails at import: a syntax error, an import, its code
                raise ValueError(f"reward[{i}].name ({term.name!r}): {type(exc).__name__}: {exc}") from None
            fn, args = found.fn, dict(term.args)
            if found.build is not None:
                fn, args = _built(found.build, args, cache, base_dir, f"reward[{i}].args"), {}
            else:
                _check_args(found.fn, args, f"reward[{i}].args")
            assert fn is not None
            if yields(fn):
                raise ValueError(
                    f"reward[{i}].name ({term.name!r}): a generator function (it yields); a reward returns a "
                    "float, or a list of floats for per-turn scores"
                )
            name = _unique(term.name, self.names)
            self.components.append(
                RewardComponent(
                    name=name,
                    fn=fn,
                    weight=term.weight,
                    args=args,
                    per_turn=term.per_turn or found.per_turn,
                    requires=found.requires,
                    inline=found.inline,
                    timeout_s=term.timeout_s,
                    fallback=term.fallback,
                    workers=None if found.inline else UserCode(name, convert=score_value),
                )
            )
        self.errors = 0
        self.failures: Counter[str] = Counter()
        self._warned: set[tuple[str, str]] = set()

    @property
    def names(self) -> list[str]:
        """Component names, in spec order."""
        return [c.name for c in self.components]

    @property
    def required_fields(self) -> dict[str, list[str]]:
        """Each dataset-row field some component ``requires`` (:func:`row_has_field`), with the names of
        the components that need it: what an evaluation checks every row for before it runs."""
        fields: dict[str, list[str]] = {}
        for component in self.components:
            for name in component.requires:
                fields.setdefault(name, []).append(component.name)
        return fields

    @property
    def per_turn_names(self) -> list[str]:
        """Names of the components declared per-turn."""
        return [c.name for c in self.components if c.per_turn]

    def prefetch(self, trajectory: Trajectory, group_size: int | None = None) -> None:
        """Hand a just-finished trajectory to the components that can start early (model judges), so their
        calls overlap the rest of the rollout. ``group_size``: members of its GRPO group in this batch, when
        known. Never raises and never blocks; :meth:`ascore` picks the results up."""
        for component in self.components:
            self._hook(component, "start", trajectory, group_size)

    def drain_metrics(self) -> dict[str, float]:
        """Metrics of stateful components since the last drain (``judge/*``): :meth:`drain_parts` as
        metrics."""
        judged, others = self.drain_parts()
        return {**others, **judged.metrics()}

    def drain_parts(self) -> tuple[JudgeStats, dict[str, float]]:
        """The judges' counters since the last drain, merged (rates weighted by lookups, the median of
        every latency), and the other stateful components' metrics (summed over components for counts,
        averaged for the rest)."""
        judged = JudgeStats()
        merged: dict[str, list[float]] = {}
        for component in self.components:
            if callable(getattr(component.fn, "drain_stats", None)):
                judged = judged.merge(self._hook(component, "drain_stats") or JudgeStats())
                continue
            for key, value in (self._hook(component, "drain_metrics") or {}).items():
                merged.setdefault(key, []).append(value)
        return judged, {k: sum(v) if k in _SUMMED else sum(v) / len(v) for k, v in merged.items()}

    def close(self) -> None:
        """Release what components hold (a judge's HTTP client and loop, a user reward's loop)."""
        for component in self.components:
            self._hook(component, "close")
            if component.workers is not None:
                component.workers.close()

    def _hook(self, component: RewardComponent, name: str, *args: Any) -> Any:
        hook = getattr(component.fn, name, None)
        if hook is None:
            return None
        try:
            return hook(*args)
        except Exception as exc:  # early starts and metrics are optional: scoring still happens
            logger.warning("reward %r: %s failed (%s: %s)", component.name, name, type(exc).__name__, exc)
            return None

    async def ascore(self, trajectories: Sequence[Trajectory]) -> list[float]:
        """Score every trajectory; fills ``rewards``, ``turn_rewards`` and ``reward_errors`` (see the module
        docstring) and returns the totals."""
        for component in self.components:
            self._hook(component, "start_batch", trajectories)
        timed_out: set[str] = set()  # components whose timeout this batch has logged
        jobs = [self._component(c, t, timed_out) for t in trajectories for c in self.components]
        scores = await asyncio.gather(*jobs)
        n = len(self.components)
        totals = []
        for i, trajectory in enumerate(trajectories):
            totals.append(self._store(trajectory, scores[i * n : (i + 1) * n]))
        return totals

    def score(self, trajectories: Sequence[Trajectory]) -> list[float]:
        """Synchronous :meth:`ascore`, in a notebook cell too (:mod:`swift_rlfactory.runtime.blocking`)."""
        return blocking.run(self.ascore(trajectories))

    def _store(self, trajectory: Trajectory, scores: Sequence[_Score]) -> float:
        trajectory.rewards, trajectory.turn_rewards, trajectory.reward_errors = {}, {}, {}
        turn_total: list[float] | None = None
        total = 0.0
        for component, score in zip(self.components, scores, strict=True):
            if not math.isfinite(component.weight * score.value) or not all(
                math.isfinite(component.weight * v) for v in score.turns or ()
            ):  # finite, but past float's range once weighted (1e308 x 10): the total would be inf
                score = self._failed(component, len(score.turns or ()), "non_finite")
            trajectory.rewards[component.name] = score.value
            total += component.weight * score.value
            if score.turns is not None:
                trajectory.turn_rewards[component.name] = score.turns
                weighted = [component.weight * v for v in score.turns]
                turn_total = (
                    weighted
                    if turn_total is None
                    else [a + b for a, b in zip(turn_total, weighted, strict=True)]
                )
            if score.error is not None:
                trajectory.reward_errors[component.name] = score.error
        # Every weighted score is finite, yet their sum can still pass float's range (two 1e308s): an
        # infinite total would reach the advantage and break its statistics, so the sum falls back too.
        overflowed = []
        if not math.isfinite(total):
            overflowed.append("the weighted sum")
            total = sum(c.weight * c.fallback for c in self.components)
        if turn_total is not None and not all(math.isfinite(v) for v in turn_total):
            overflowed.append("a turn's weighted sum")
            fallback = sum(c.weight * c.fallback for c in self.components if c.per_turn)
            turn_total = [fallback] * len(turn_total)
        if overflowed:
            self._count_total()
            trajectory.reward_errors["total"] = "non_finite: " + ", ".join(overflowed)
        trajectory.rewards["total"] = total
        if turn_total is not None:
            trajectory.turn_rewards["total"] = turn_total
        return total

    async def _component(
        self, component: RewardComponent, trajectory: Trajectory, timed_out: set[str]
    ) -> _Score:
        n_turns = len(trajectory.assistant_turns)
        for name in component.requires:
            if not row_has_field(trajectory.row, name):
                self._warn_missing(component, name)
                return self._failed(component, n_turns, f"missing_field: {name}")
        try:
            raw = await asyncio.wait_for(self._call(component, trajectory), component.timeout_s)
        except NotAScore as exc:  # a value float() cannot read (a user reward's, read in its worker)
            return self._not_a_score(component, n_turns, exc)
        except CallStuck as exc:  # logged once by the workers, when the bound is reached
            return self._failed(component, n_turns, f"timeout: {exc}")
        except TimeoutError:
            if component.name not in timed_out:  # once a batch: the count is in rewards/timeouts
                timed_out.add(component.name)
                logger.warning(
                    "reward %r took longer than its timeout_s=%g s; scoring %g (further timeouts in this "
                    "batch are counted in rewards/timeouts, not logged)",
                    component.name, component.timeout_s, component.fallback,
                )  # fmt: skip
            return self._failed(component, n_turns, "timeout")
        except (Exception, SystemExit, asyncio.CancelledError) as exc:  # a broken reward must not end the run
            if isinstance(exc, asyncio.CancelledError) and cancelled_by_caller():
                raise
            first = self.failures["error"] == 0
            logger.warning(
                "reward %r failed (%s: %s); scoring %g for this trajectory",
                component.name, type(exc).__name__, exc, component.fallback, exc_info=first,
            )  # fmt: skip
            return self._failed(component, n_turns, f"error: {type(exc).__name__}")
        return self._checked(component, raw, n_turns)

    async def _call(self, component: RewardComponent, trajectory: Trajectory) -> float | list[float]:
        """The component's value, read by :func:`score_value` where the reward ran (a user reward's in its
        worker, so a blocking ``__float__`` is bounded by timeout_s too)."""
        fn, args = component.fn, component.args
        if component.workers is not None:  # user code may block: off this loop, so timeout_s holds
            return await component.workers.call(fn, term_view(trajectory), **args)
        value = fn(trajectory, **args)
        if inspect.isawaitable(value):
            value = await value
        return score_value(value)

    def _checked(self, component: RewardComponent, raw: float | list[float], n_turns: int) -> _Score:
        """The score for a value :meth:`_call` read: a finite float, or one finite float per assistant turn."""
        if isinstance(raw, list):
            values = raw
            if len(values) != n_turns:
                logger.warning(
                    "reward %r returned %d scores for %d assistant turns; scoring %g",
                    component.name, len(values), n_turns, component.fallback,
                )  # fmt: skip
                return self._failed(component, n_turns, f"wrong_length: {len(values)} for {n_turns} turns")
            error = None
            if not all(math.isfinite(v) for v in values):
                self._count(component, "non_finite")
                error = "non_finite"
                values = [v if math.isfinite(v) else component.fallback for v in values]
            # the mean of finite scores is finite; sum() first would overflow for 1e308s
            value = math.fsum(v / len(values) for v in values) if values else component.fallback
            return _Score(value, values, error)
        if component.per_turn:
            return self._failed(component, n_turns, f"wrong_length: a scalar for {n_turns} turns")
        if not math.isfinite(raw):
            return self._failed(component, n_turns, "non_finite")
        return _Score(raw)

    def _not_a_score(self, component: RewardComponent, n_turns: int, exc: NotAScore) -> _Score:
        """The fallback for a value ``float()`` cannot read, logged once per component."""
        cause = exc.__cause__
        if (component.name, "not_a_score") not in self._warned:
            self._warned.add((component.name, "not_a_score"))
            logger.warning(
                "reward %r: %s; scoring %g (logged once: later ones are counted in rewards/error and "
                "recorded in reward_errors)",
                component.name, exc, component.fallback,
            )  # fmt: skip
        return self._failed(component, n_turns, f"error: {type(cause).__name__}")

    def _failed(self, component: RewardComponent, n_turns: int, error: str) -> _Score:
        self._count(component, error.partition(":")[0])
        turns = [component.fallback] * n_turns if component.per_turn else None
        return _Score(component.fallback, turns, error)

    def _count(self, component: RewardComponent, cause: str) -> None:
        self.errors += 1
        self.failures[cause] += 1
        if cause == "non_finite" and self.failures[cause] == 1:
            logger.warning(
                "reward %r returned NaN or infinity; scoring %g", component.name, component.fallback
            )

    def _count_total(self) -> None:
        self.errors += 1
        self.failures["non_finite"] += 1
        if ("total", "non_finite") not in self._warned:
            self._warned.add(("total", "non_finite"))
            logger.warning(
                "the weighted sum of finite reward scores overflowed to infinity; the total scores the sum "
                "of the fallbacks (counted in rewards/non_finite, recorded as reward_errors['total'])"
            )

    def _warn_missing(self, component: RewardComponent, name: str) -> None:
        if (component.name, name) in self._warned:
            return
        self._warned.add((component.name, name))
        also = " (or solution/answer/answers)" if name == GOLDEN_ANSWERS else ""
        logger.warning(
            "reward %r needs the dataset field %r%s; rows without it score %g and are counted in "
            "rewards/missing_field",
            component.name, name, also, component.fallback,
        )  # fmt: skip


_SUMMED = {"judge/calls", "judge/errors", "judge/out_of_range"}


def term_view(trajectory: Trajectory) -> Trajectory:
    """A copy of ``trajectory`` for one user reward term to read (and change, if it likes): a deep copy of
    its messages, tool calls, row and scores, sharing only its ``tool_env`` (the live environment) and its
    episode ``state`` (live, torn down after the rewards). What the term changes in the rest reaches neither
    another term nor the logged trajectory."""
    shared = [x for x in (trajectory.tool_env, trajectory.state) if x is not None]
    return copy.deepcopy(trajectory, {id(x): x for x in shared})


def _built(
    build: Callable[[dict[str, Any], ToolCache | None, Path], RewardFn],
    args: dict[str, Any],
    cache: ToolCache | None,
    base_dir: Path,
    where: str,
) -> RewardFn:
    try:
        return build(args, cache, base_dir)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(part) for part in err["loc"])
        raise ValueError(f"{where}.{field}: {err['msg']}" if field else f"{where}: {err['msg']}") from None


def _check_args(fn: RewardFn | None, args: dict[str, Any], where: str) -> None:
    """Fail at load when ``fn(trajectory, **args)`` could never be called (a misspelt or missing argument),
    instead of every trajectory scoring its fallback with a TypeError."""
    try:
        signature = inspect.signature(fn)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # a callable without one: it is called as given
        return
    try:
        signature.bind(None, **args)
    except TypeError as exc:
        raise ValueError(f"{where}: {exc} (the function takes {signature})") from None


def _unique(name: str, taken: Sequence[str]) -> str:
    """``name``, or ``name_2``, ``name_3``, ... when an earlier term of the spec already has it (two judges
    with different rubrics): each keeps its own score, metric and error."""
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name}_{n}", n + 1
    return unique


def row_has_field(row: Mapping[str, Any], name: str) -> bool:
    """Whether a dataset row holds field ``name`` as a reward that ``requires`` it reads it:
    ``golden_answers`` is any reference answer (:func:`~swift_rlfactory.data.answers.reference_answers`), any
    other field a value other than ``None``, NaN, ``""`` or ``[]``. A numpy array (how pandas hands back a
    parquet cell) is read as its list: ``==`` on one is elementwise, and its truth value raised."""
    if name == GOLDEN_ANSWERS:
        return bool(reference_answers(row))
    value = row.get(name)
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    return not (missing(value) or (isinstance(value, str | list) and not value))
