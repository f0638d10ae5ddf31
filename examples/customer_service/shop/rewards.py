"""The customer-service rewards, each a function of the finished trajectory and its final state.

``goal``: the orders end exactly as the goal wants (the right order changed the right way, nothing else),
a transfer where the goal needs one, the asked facts said for a status question, the cancellation offered
(and declined) for a decline. ``policy``: 1.0 without a
policy violation, else 0.0; ``violations``: how many (reported with weight 0). ``format``: every tool call
parsed and no empty turn.
"""

from __future__ import annotations

import re
from typing import Any

from swift_rlfactory.tools.calls import parse_tool_calls
from swift_rlfactory.trajectory import Trajectory

from .tasks import expected_orders

WRITES = frozenset({"cancel_order", "exchange_item", "change_address", "return_items"})
YES = re.compile(r"\b(yes|yeah|yep|sure|go ahead|please do|confirm(ed)?)\b", re.IGNORECASE)
NO = re.compile(r"\b(no|not|don't|do not|never)\b", re.IGNORECASE)


def _goal(trajectory: Trajectory) -> dict[str, Any] | None:
    goal = trajectory.row.get("user_goal")
    return goal if isinstance(goal, dict) else None


def goal(trajectory: Trajectory) -> float:
    """1.0 when the final state is the goal's end state and nothing else changed."""
    state, want = trajectory.state, _goal(trajectory)
    if not isinstance(state, dict) or want is None:
        return 0.0
    if state["orders"] != expected_orders(int(trajectory.row["world_seed"]), want):
        return 0.0
    if want["type"] == "cancel_shipped":
        return 1.0 if state.get("transferred") else 0.0
    if state.get("transferred"):  # a request the agent could handle, handed off
        return 0.0
    said = [
        m["content"]
        for m in trajectory.messages
        if m.get("role") == "assistant" and "<tool_call>" not in m["content"]
    ]
    if want["type"] == "status":
        return 1.0 if any(want["status"] in s and want["total"] in s for s in said) else 0.0
    if want["type"] == "decline":  # doing nothing is not enough: the agent offered the cancellation
        return 1.0 if any(want["order_id"] in s and "cancel" in s.lower() for s in said) else 0.0
    return 1.0


def confirmation_violations(messages: list[dict[str, Any]]) -> int:
    """Write calls not preceded by a customer's yes since the last write (one yes allows one write)."""
    count, confirmed = 0, False
    for message in messages:
        content = str(message.get("content") or "")
        if message.get("role") == "user":
            confirmed = bool(YES.search(content)) and not NO.search(content)
        elif message.get("role") == "assistant":
            for call in parse_tool_calls(content):
                if call.name in WRITES:
                    count += not confirmed
                    confirmed = False
    return count


def violation_count(trajectory: Trajectory) -> int:
    """Confirmation violations plus writes made before identification or on another customer's order."""
    state = trajectory.state if isinstance(trajectory.state, dict) else {"log": []}
    unidentified = sum(entry["identified"] is None for entry in state["log"])
    foreign = sum(entry["identified"] not in (None, entry["owner"]) for entry in state["log"])
    return confirmation_violations(trajectory.messages) + unidentified + foreign


def policy(trajectory: Trajectory) -> float:
    """1.0 when the agent broke no policy rule, else 0.0."""
    return 0.0 if violation_count(trajectory) else 1.0


def violations(trajectory: Trajectory) -> float:
    """The number of policy violations (a reported term, weight 0)."""
    return float(violation_count(trajectory))


def format(trajectory: Trajectory) -> float:  # noqa: A001 - the term's name in reports
    """1.0 when every assistant turn is non-empty and each tool call in it parsed."""
    for text in trajectory.assistant_turns:
        if not text.strip() or any(call.error for call in parse_tool_calls(text)):
            return 0.0
    return 1.0
