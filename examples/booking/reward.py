"""The booking world's reward, checked by code on the episode's final state (``trajectory.state``).

``constraints``: the share of the task's hard constraints the final itinerary meets (partial credit);
``success``: 1 when it meets all of them. ``report`` gives the per-constraint breakdown. The task is read
from the dataset row (the state's copy is the same); the format term is the built-in ``format``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from goals import check  # noqa: E402


def final_state(state: Any) -> dict[str, Any] | None:
    """The state as plain JSON: a live ``Trip`` gives its snapshot, a rollout server's copy is one already."""
    make = getattr(state, "snapshot", None)
    return make() if callable(make) else state


def report(trajectory: Any) -> dict[str, bool]:
    """Each hard constraint of the trajectory's task, met or not; empty without a task or a state."""
    task = trajectory.row.get("task")
    state = final_state(trajectory.state)
    if not task or not state:
        return {}
    return check(task, state)


def constraints(trajectory: Any, **_: Any) -> float:
    """The share of hard constraints met (0 without a state: a failed setup)."""
    met = report(trajectory)
    return sum(met.values()) / len(met) if met else 0.0


def success(trajectory: Any, **_: Any) -> float:
    """1.0 when every hard constraint is met."""
    met = report(trajectory)
    return float(bool(met) and all(met.values()))
