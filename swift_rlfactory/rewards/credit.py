"""Turn-level credit: from per-turn rewards to one advantage per trained token (pure: lists in, lists out).

With ``credit: {mode: turn}`` a token of turn ``t`` gets ``A_out + turn_weight * A_turn[t]``, ``A_turn``
being the discounted return of the turn rewards normalised per (GRPO group, turn index). The formula, why
this shape against MT-GRPO, GiGPO and ROLL, and the overflow rule: docs/rewards.md#per-turn-credit.
The ms-swift trainer that applies it is ``adapters/swift_credit.py``.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Sequence
from typing import Literal

Scale = Literal["group", "batch", "none"]
EPS = 1e-4
IGNORE = -100  # the label of a token without loss (the Hugging Face / ms-swift convention)

logger = logging.getLogger(__name__)


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """``G_t = r_t + gamma * G_{t+1}`` for every turn, computed from the last turn backwards."""
    returns = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        returns[t] = running
    return returns


def turn_advantages(
    returns: Sequence[Sequence[float] | None],
    groups: Sequence[Sequence[int]],
    scale: Scale = "group",
    eps: float = EPS,
) -> list[list[float]]:
    """Normalise each turn's return against the same turn of the other trajectories of its group.

    Args:
        returns: per trajectory, one return per turn; ``None`` for a trajectory without turn credit (it
            is left out of every statistic and gets ``[]``).
        groups: index lists partitioning ``range(len(returns))``, one per GRPO group (same prompt).
        scale: ``group``, ``batch`` or ``none``, as ms-swift's ``--scale_rewards``.

    Returns:
        per trajectory, one advantage per turn; 0 where the return or its set's statistics are not finite.
    """
    out: list[list[float]] = [[0.0] * len(r) if r is not None else [] for r in returns]
    skipped = 0
    batch_std = 1.0
    if scale == "batch":
        flat = [g for r in returns if r is not None for g in r if math.isfinite(g)]
        try:
            batch_std = statistics.stdev(flat) if len(flat) > 1 else 0.0
        except OverflowError:  # every division below gives 0 or overflows to 0
            batch_std = math.inf
    for group in groups:
        members = [i for i in group if returns[i] is not None]
        depth = max((len(returns[i]) for i in members), default=0)
        for t in range(depth):
            reached = [i for i in members if len(returns[i]) > t]
            at_t = [i for i in reached if math.isfinite(returns[i][t])]
            skipped += len(reached) - len(at_t)
            if len(at_t) < 2:  # no other trajectory reached this turn: nothing to compare with
                continue
            normalised = _normalised([returns[i][t] for i in at_t], scale, batch_std, eps)
            if normalised is None:
                skipped += len(at_t)
                continue
            for i, advantage in zip(at_t, normalised, strict=True):
                out[i][t] = advantage
    if skipped:
        logger.warning(
            "%d turn returns were not finite or overflowed their group's statistics: their turn advantage "
            "is 0 (look for reward_errors 'non_finite' in trajectories.jsonl)",
            skipped,
        )
    return out


def _normalised(values: list[float], scale: Scale, batch_std: float, eps: float) -> list[float] | None:
    """``(value - mean) / divisor`` for one (group, turn) set of finite returns; ``None`` where the
    statistics or an advantage pass float's range."""
    try:
        mean = statistics.fmean(values)
        if scale == "group":
            divisor = statistics.stdev(values) + eps
        elif scale == "batch":
            divisor = batch_std + eps
        else:
            divisor = 1.0
        advantages = [(value - mean) / divisor for value in values]
    except OverflowError:
        return None
    return advantages if all(math.isfinite(a) for a in advantages) else None


def trained_token_turns(
    input_ids: Sequence[int],
    labels: Sequence[int],
    turns: Sequence[Sequence[int]],
    turn_masks: Sequence[Sequence[int]] | None = None,
) -> list[int | None]:
    """Which assistant turn each trained token of an encoded trajectory belongs to, in sequence order.

    One entry per position with ``label != -100``: the turn index, or ``None`` for a token of no turn found
    (the matching rule: docs/rewards.md#which-tokens-a-turn-owns).
    """
    n = len(input_ids)
    owner: list[int | None] = [None] * n
    starts: list[tuple[int, int]] = []  # (position, turn) of every turn found
    cursor = 0
    for turn, ids in enumerate(turns):
        ids = list(ids)
        if not ids:
            continue
        mask = list(turn_masks[turn]) if turn_masks and turn < len(turn_masks) else []
        at = _find_turn(input_ids, labels, ids, mask or None, cursor)
        if at is None:
            continue
        starts.append((at, turn))
        cursor = at + len(ids)
    next_start = [p for p, _ in starts[1:]] + [n] * bool(starts)  # none found (a lone turn cut): all None
    for (at, turn), stop in zip(starts, next_start, strict=True):
        end = at + len(turns[turn])
        q = at
        while q < stop and (q < end or labels[q] != IGNORE):
            owner[q] = turn
            q += 1
    return [owner[p] for p in range(n) if labels[p] != IGNORE]


def _find_turn(
    input_ids: Sequence[int], labels: Sequence[int], ids: list[int], mask: list[int] | None, start: int
) -> int | None:
    first, length = ids[0], len(ids)
    for at in range(start, len(input_ids) - length + 1):
        if input_ids[at] != first or list(input_ids[at : at + length]) != ids:
            continue
        trained = range(length) if mask is None else [j for j, m in enumerate(mask) if m]
        if all(labels[at + j] != IGNORE for j in trained):
            return at
    return None


def token_advantages(
    outcome: float, turn_advantage: Sequence[float], token_turns: Sequence[int | None], turn_weight: float
) -> list[float]:
    """``A_out + turn_weight * A_turn[t]`` for each trained token of turn ``t``; ``A_out`` where ``t`` is
    ``None`` or has no turn advantage (more turns in the tokens than in the per-turn rewards)."""
    return [
        outcome + turn_weight * turn_advantage[t] if t is not None and t < len(turn_advantage) else outcome
        for t in token_turns
    ]
