"""Turn-level credit: from per-turn rewards to one advantage per trained token.

GRPO gives every token of a trajectory the same advantage, so a good first search and a bad final answer
are credited alike. With ``credit: {mode: turn}`` each assistant turn ``t`` of trajectory ``i`` gets

    G[i,t] = sum_{k >= t} gamma^(k-t) * r[i,k]                      discounted return of the turn rewards
    A_turn[i,t] = (G[i,t] - mean_j G[j,t]) / (std_j G[j,t] + eps)    j: trajectories of i's GRPO group
                                                                    that have a turn t
    A[token in turn t of i] = A_out[i] + turn_weight * A_turn[i,t]

where ``r[i,k]`` is the trajectory's per-turn reward total (``Trajectory.turn_rewards["total"]``) and
``A_out[i]`` is ms-swift's own group-normalised advantage of the scalar reward, left exactly as ms-swift
computes it (any ``--advantage_estimator``). Tokens that carry no loss (prompt, tool observations, the
masked thinking prefix) get no advantage at all.

Why this shape, against the references:

* **MT-GRPO** (Zeng et al. 2025) adds a group-normalised turn advantage to the outcome advantage on the
  tool-call turn: ``A = A_out + lambda * A_turn``. That is this formula with ``gamma = 0``; a turn that has
  no per-turn reward (``r = 0`` for the whole group) keeps only ``A_out``, as MT-GRPO's answer turn does.
* **GiGPO** (Feng et al. 2025) normalises discounted step returns within *step groups*: the steps of one
  prompt's trajectories that reached the same environment state, and adds them as
  ``A_episode + omega * A_step`` (omega = 1, gamma = 0.95). Text agents rarely revisit identical states,
  except at turn 0, where every trajectory of a group sees the same prompt. So the group here is "same
  prompt, same turn index": exact GiGPO anchor states at turn 0, the nearest equivalent after it.
* **ROLL**'s agentic pipeline turns step rewards into discounted returns (``step_reward_gamma``, default
  0.95) and normalises them per trajectory group. Pooling all turns of a group into one mean instead
  would credit early turns for merely being early (their returns sum more rewards); normalising per turn
  index removes that horizon bias and handles trajectories of different lengths: a turn index that only
  one trajectory of the group reached has no baseline and gets ``A_turn = 0``, like a GRPO group with a
  single distinct reward.

``scale`` follows ms-swift's ``--scale_rewards``: ``group`` divides by the standard deviation of the
(group, turn) set, ``batch`` by that of every turn return in the batch, ``none`` only centres (GiGPO's
``mean_norm``). ``eps = 1e-4`` as in ms-swift, so equal returns give 0, not a division by zero.

A return that is not finite (finite turn rewards can still discount past float's range), and every return
of a (group, turn) set whose statistics overflow, gets ``A_turn = 0`` with a warning: one such trajectory
keeps its outcome advantage instead of ending the training run inside the batch postprocess.

Everything here is pure: lists in, lists out. The ms-swift trainer subclass that feeds it and writes the
result into the loss's advantage tensor is ``adapters/swift_credit.py``.
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
        per trajectory, one advantage per turn (``[]`` where ``returns`` was ``None``); 0 for a return
        that is not finite and for every return of a set whose statistics overflow.
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

    ``turns`` are the assistant turns' token ids as the rollout produced them (ms-swift's
    ``response_token_ids``) and ``turn_masks`` their loss masks. Each turn is found in ``input_ids`` after
    the previous one, at a place where every token its mask trains really carries a label (so a copy of
    the same text inside the prompt never matches). A turn owns its own trained tokens plus the trained
    tokens the template appends right after it (the ``<|im_end|>\\n`` that closes a tool-calling turn).
    Trained tokens that belong to no turn found (a turn cut by left truncation, or an assistant message
    of the dataset's own history) map to ``None``: they keep the outcome advantage only.

    Returns:
        one entry per position with ``label != -100``, in order: the turn index or ``None``.
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
