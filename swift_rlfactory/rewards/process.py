"""Built-in per-turn (process) rewards: one score per assistant turn, not one per trajectory.

An outcome reward such as ``em`` credits a good first search and a bad final answer alike. A process
reward scores each assistant turn on its own, so turn-level credit (``credit: {mode: turn}``) can tell the
turns apart. Both built-ins here return a list with one float per assistant turn the rollout generated
(:attr:`Trajectory.assistant_turns`: a dataset row's earlier chat history is prompt, not turns), in order;
tool calls are matched to their turn by the ``turn`` index the rollout records (counted from 1).
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
    """Per turn: the share of that turn's tool calls that succeeded; ``no_call`` for a turn without calls.

    A call that could not be parsed, timed out or raised counts as a failure. The answer turn makes no
    calls, so with the default ``no_call: 0`` it scores the same in every trajectory of a group and carries
    no turn-level signal of its own (the outcome reward credits it).
    """
    by_turn = calls_by_turn(trajectory)
    scores = []
    for i in range(len(trajectory.assistant_turns)):
        calls = by_turn.get(i)
        scores.append(sum(1 for c in calls if not c.get("error")) / len(calls) if calls else no_call)
    return scores


def turn_format(trajectory: Trajectory) -> list[float]:
    """Per turn: 1.0 when the turn follows the protocol, else 0.0.

    A tool turn follows it when every call parsed (a call past ``max_calls_per_turn`` parsed too) and it
    holds no ``<answer>``; a turn without calls follows it when it holds exactly one non-empty ``<answer>``
    block and no tool call. Only the visible reply counts, as for the parser: reasoning that mentions
    ``<answer>`` or ``<tool_call>`` changes nothing (:func:`~.rules.visible_reply`), nor does an
    ``<answer>`` inside a call's argument (:func:`~.rules.opens_answer`).
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
