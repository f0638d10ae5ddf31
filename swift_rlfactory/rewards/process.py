"""Built-in per-turn (process) rewards: one score per assistant turn, not one per trajectory.

Each returns one float per generated assistant turn, in order; what each scores:
docs/rewards.md#per-turn-process-rewards.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..trajectory import Trajectory
from .rules import answers_once, opens_answer, parse_failed, visible_reply


def calls_by_turn(trajectory: Trajectory) -> dict[int, list[dict[str, Any]]]:
    """Tool-call records grouped by 0-based assistant turn (the building block of a per-turn reward)."""
    by_turn: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for call in trajectory.tool_calls:
        turn = call.get("turn")
        if isinstance(turn, int) and turn >= 1:
            by_turn[turn - 1].append(call)
    return by_turn


def turn_tool_success(trajectory: Trajectory, no_call: float = 0.0) -> list[float]:
    """Per turn: the share of that turn's tool calls that succeeded; ``no_call`` for a turn without calls."""
    by_turn = calls_by_turn(trajectory)
    scores = []
    for i in range(len(trajectory.assistant_turns)):
        calls = by_turn.get(i)
        scores.append(sum(1 for c in calls if not c.get("error")) / len(calls) if calls else no_call)
    return scores


def turn_format(trajectory: Trajectory) -> list[float]:
    """Per turn: 1.0 when the turn follows the protocol (calls that parsed and no answer, or exactly one
    non-empty answer and no call, in the visible reply), else 0.0.
    """
    by_turn = calls_by_turn(trajectory)
    scores = []
    for i, text in enumerate(trajectory.assistant_turns):
        calls = by_turn.get(i)
        if calls:
            parsed = not any(parse_failed(c) for c in calls)
            scores.append(float(parsed and not opens_answer(visible_reply(text))))
        else:
            scores.append(float(answers_once(text)))
    return scores
