"""Scripted policies for the booking world, driven through the real Environment (tools, episode, rewards).

``oracle``: turn 1 searches every part the task asks for, turn 2 books the cheapest item meeting every
constraint (``goals.cheapest_plan``; each id it books is printed in a turn-1 observation), turn 3 answers
with the booking ids read from the observations. ``do_nothing`` answers at once; ``oracle(..., mistake=)``
makes one kind of wrong booking. :func:`play` runs a policy on a row: the SFT demonstrations (demos.py)
and the tests use it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from goals import cheapest_plan, wanted
from world import make_world

from swift_rlfactory.env.environment import Environment
from swift_rlfactory.rollout.episode import Generation, run_episode
from swift_rlfactory.tools.calls import hermes_call
from swift_rlfactory.trajectory import Trajectory

Generate = Callable[[list[dict[str, Any]]], Awaitable[Generation]]
_BOOKED = re.compile(r"^booked (B\d+):", re.MULTILINE)


def search_calls(task: dict[str, Any]) -> list[str]:
    """The searches that list every option of the task's parts."""
    calls = []
    for part in wanted(task):
        if part == "flight":
            calls.append(
                hermes_call(
                    "search_flights",
                    {"origin": task["origin"], "destination": task["city"], "date": task["date"]},
                )
            )
        elif part == "return_flight":
            args = {"origin": task["city"], "destination": task["origin"], "date": task["return_date"]}
            calls.append(hermes_call("search_flights", args))
        elif part == "hotel":
            calls.append(hermes_call("search_hotels", {"city": task["city"]}))
        elif part == "restaurant":
            calls.append(
                hermes_call("search_restaurants", {"city": task["city"], "cuisine": task["cuisine"]})
            )
        else:
            calls.append(
                hermes_call("search_attractions", {"city": task["city"], "category": task["category"]})
            )
    return calls


def book_call(step: dict[str, Any]) -> str:
    """The booking call of one plan step."""
    part, item, people = step["part"], step["item"], step["people"]
    if part in ("flight", "return_flight"):
        return hermes_call("book_flight", {"flight_id": item, "passengers": people})
    if part == "hotel":
        return hermes_call(
            "book_hotel",
            {"hotel_id": item, "check_in": step["date"], "nights": step["nights"], "guests": people},
        )
    if part == "restaurant":
        return hermes_call("book_restaurant", {"restaurant_id": item, "date": step["date"], "guests": people})
    return hermes_call("book_attraction", {"attraction_id": item, "date": step["date"], "tickets": people})


def _apply(plan: list[dict[str, Any]], mistake: str | None) -> list[dict[str, Any]]:
    """``plan`` with one kind of mistake: ``party`` (one person too many on every booking), ``extra`` (a
    second booking of the first item), ``skip`` (the last part left out)."""
    if mistake == "party":
        return [{**step, "people": step["people"] + 1} for step in plan]
    if mistake == "extra":
        return [*plan, plan[0]]
    if mistake == "skip":
        return plan[:-1]
    assert mistake is None, mistake
    return plan


def oracle(row: dict[str, Any], mistake: str | None = None) -> Generate:
    """The oracle policy for ``row`` (search, book the cheapest plan, answer), or a wrong variant."""
    task = row["task"]
    plan = _apply(cheapest_plan(make_world(row["world_seed"]), task), mistake)

    async def generate(messages: list[dict[str, Any]]) -> Generation:
        turn = sum(m["role"] == "assistant" for m in messages[row_turns(messages) :])
        if turn == 0:
            return Generation("\n".join(search_calls(task)))
        if turn == 1:
            return Generation("\n".join(book_call(step) for step in plan))
        booked = [b for m in messages if m["role"] == "tool" for b in _BOOKED.findall(m["content"])]
        return Generation(f"<answer>{' '.join(booked)}</answer>")

    return generate


def do_nothing(row: dict[str, Any]) -> Generate:
    """A policy that books nothing and answers at once."""

    async def generate(messages: list[dict[str, Any]]) -> Generation:
        return Generation("<answer>nothing booked</answer>")

    return generate


def row_turns(messages: list[dict[str, Any]]) -> int:
    """Index of the first message after the prompt (the system and user messages)."""
    return next((i for i, m in enumerate(messages) if m["role"] not in ("system", "user")), len(messages))


async def play(
    env: Environment,
    key: str,
    row: dict[str, Any],
    policy: Generate,
    messages: list[dict[str, Any]] | None = None,
) -> Trajectory:
    """One episode of ``policy`` on ``row`` in ``env``: setup, turns, rewards scored on the final state,
    teardown. ``messages``: the prompt (default: the row's own messages)."""
    prompt = messages if messages is not None else row["messages"]
    fields = {k: v for k, v in row.items() if k != "messages"}
    async with env.episodes.scope(key, fields) as state:
        trajectory = await run_episode(
            prompt, policy, env.executor, env.config.limits.max_turns, row=fields, state=state
        )
        trajectory.tool_env = env
        await env.reward.ascore([trajectory])
    return trajectory
