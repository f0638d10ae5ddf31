"""Booking tasks: the task types, how a task is drawn from a world, its text, its hard constraints checked on
a final itinerary, and the cheapest plan that meets them (what the oracle books and what sets the budget).

A task is a plain dict: ``type``, ``city`` (where the trip goes), ``date``, ``party``, ``budget`` and, by
type, ``origin``, ``return_date``, ``nights``, ``nonstop``, ``min_rating``, ``cuisine``, ``category``,
``arrive_by``. Which items a task asks for follows from its keys (:func:`wanted`).
"""

from __future__ import annotations

import random
from typing import Any

from world import CATEGORIES, make_world

# type -> the parts it asks for; the out-of-distribution types are never trained on: a round trip (two
# flights and the nights between them) and an arrival deadline (a constraint kind no train type has).
TRAIN_TYPES = {
    "flight": ("flight",),
    "flight_hotel": ("flight", "hotel"),
    "hotel_dinner": ("hotel", "restaurant"),
    "full_trip": ("flight", "hotel", "restaurant"),
    "day_out": ("restaurant", "attraction"),
}
OOD_TYPES = {
    "round_trip": ("flight", "return_flight", "hotel"),
    "early_arrival": ("flight", "hotel", "attraction"),
}
TYPES = {**TRAIN_TYPES, **OOD_TYPES}
CONSTRAINTS = (
    "flight", "return_flight", "nonstop", "arrive_by", "hotel", "rating", "restaurant", "cuisine",
    "attraction", "category", "party", "budget", "nothing_else",
)  # fmt: skip


def wanted(task: dict[str, Any]) -> list[str]:
    """The bookings a task asks for, in the order they are made."""
    return list(TYPES[task["type"]])


def draw(task_type: str, world: dict[str, Any], rng: random.Random) -> dict[str, Any] | None:
    """A task of ``task_type`` in ``world``, or ``None`` when these draws admit no plan (draw again)."""
    parts = TYPES[task_type]
    origin, city = rng.sample(world["cities"], 2)
    day = rng.randrange(len(world["dates"]) - 2)
    task: dict[str, Any] = {
        "type": task_type,
        "city": city,
        "date": world["dates"][day],
        "party": rng.choice((1, 2, 2, 3, 4)),
    }
    if "flight" in parts:
        task["origin"] = origin
        task["nonstop"] = rng.random() < 0.5
    if "return_flight" in parts:
        task["return_date"] = world["dates"][day + rng.choice((1, 2))]
    if "hotel" in parts:
        task["nights"] = _nights(task, rng)
        task["min_rating"] = rng.choice((None, 3.0, 3.5, 4.0))
    if "restaurant" in parts:
        task["cuisine"] = rng.choice(
            sorted({r["cuisine"] for r in world["restaurants"] if r["city"] == city})
        )
    if "attraction" in parts:
        task["category"] = rng.choice(CATEGORIES)
    if task_type == "early_arrival":
        task["arrive_by"] = rng.choice(("12:00", "14:00", "16:00"))
    plan = cheapest_plan(world, task)
    if plan is None:
        return None
    cost = sum(step["cost"] for step in plan)
    task["budget"] = int(-(-cost * rng.uniform(1.05, 1.3) // 10) * 10)
    return task


def _nights(task: dict[str, Any], rng: random.Random) -> int:
    if "return_date" in task:
        return int(task["return_date"][-2:]) - int(task["date"][-2:])
    return rng.choice((1, 2, 3))


def text(task: dict[str, Any]) -> str:
    """The user's request in words: every hard constraint is stated."""
    who = "me" if task["party"] == 1 else f"{task['party']} people"
    parts = []
    if "origin" in task:
        kind = "non-stop flight" if task.get("nonstop") else "flight"
        parts.append(f"a {kind} from {task['origin']} to {task['city']} on {task['date']}")
        if task.get("arrive_by"):
            parts[-1] += f" arriving by {task['arrive_by']}"
    if "return_date" in task:
        parts.append(f"a {'non-stop ' if task.get('nonstop') else ''}flight back on {task['return_date']}")
    if "nights" in task:
        rating = f" rated {task['min_rating']} or more" if task.get("min_rating") else ""
        parts.append(f"a hotel{rating} in {task['city']} for {task['nights']} nights from {task['date']}")
    if "cuisine" in task:
        parts.append(f"a table at a {task['cuisine']} restaurant in {task['city']} on {task['date']}")
    if "category" in task:
        parts.append(f"tickets for a {task['category']} in {task['city']} on {task['date']}")
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"Please book {listed}, for {who}. The total budget is ${task['budget']}."


def _flight_ok(task: dict[str, Any], f: dict[str, Any], back: bool) -> bool:
    route = (task["city"], task["origin"]) if back else (task["origin"], task["city"])
    return (f["origin"], f["destination"]) == route and f["date"] == task["return_date" if back else "date"]


def _options(world: dict[str, Any], task: dict[str, Any], part: str) -> list[dict[str, Any]]:
    """Items of ``part`` that meet every hard constraint and have room for the party, cheapest first."""
    party, city = task["party"], task["city"]
    if part in ("flight", "return_flight"):
        items = [
            f for f in world["flights"] if _flight_ok(task, f, part == "return_flight") and f["seats"] >= party
            and (not task.get("nonstop") or f["stops"] == 0)
            and (part == "return_flight" or not task.get("arrive_by") or f["arrive"] <= task["arrive_by"])
        ]  # fmt: skip
    elif part == "hotel":
        items = [
            h
            for h in world["hotels"]
            if h["city"] == city and h["rooms"] >= 1 and h["rating"] >= (task.get("min_rating") or 0)
        ]
    elif part == "restaurant":
        items = [
            r
            for r in world["restaurants"]
            if r["city"] == city and r["cuisine"] == task["cuisine"] and r["tables"] >= 1
        ]
    else:
        items = [
            a
            for a in world["attractions"]
            if a["city"] == city and a["category"] == task["category"] and a["tickets"] >= party
        ]
    return sorted(items, key=lambda i: (i["price"], i["id"]))


def cheapest_plan(world: dict[str, Any], task: dict[str, Any]) -> list[dict[str, Any]] | None:
    """One step per wanted part (``part``, ``item`` id, ``people``, ``date``, ``nights``, ``cost``), the
    cheapest item meeting the constraints each; ``None`` when some part has no such item."""
    plan = []
    for part in wanted(task):
        options = _options(world, task, part)
        if not options:
            return None
        item = options[0]
        nights = task.get("nights", 0) if part == "hotel" else 0
        date = task["return_date"] if part == "return_flight" else task["date"]
        cost = item["price"] * (nights if part == "hotel" else task["party"])
        plan.append(
            {
                "part": part,
                "item": item["id"],
                "people": task["party"],
                "date": date,
                "nights": nights,
                "cost": cost,
            }
        )
    return plan


def check(task: dict[str, Any], state: dict[str, Any]) -> dict[str, bool]:
    """Each hard constraint of ``task`` that applies, met or not, on a final state (``Trip.snapshot()``).

    A booked part counts when exactly one booking of its kind matches it; ``party``, ``budget`` and
    ``nothing_else`` need at least one booking (doing nothing meets none of them)."""
    world, bookings = state["world"], state["bookings"]
    items = {
        i["id"]: i for table in ("flights", "hotels", "restaurants", "attractions") for i in world[table]
    }
    parts = wanted(task)
    flights = [items[b["item"]] for b in bookings if b["kind"] == "flight"]
    out, chosen = {}, {}
    for part in parts:
        kind = "flight" if part == "return_flight" else part
        if kind == "flight":
            hits = [f for f in flights if _flight_ok(task, f, part == "return_flight")]
        else:
            hits = [b for b in bookings if b["kind"] == kind and items[b["item"]]["city"] == task["city"]]
            hits = [
                b
                for b in hits
                if b["date"] == task["date"] and (kind != "hotel" or b["nights"] == task["nights"])
            ]
            hits = [items[b["item"]] for b in hits]
        out[part] = len(hits) == 1
        chosen[part] = hits[0] if len(hits) == 1 else None
    if task.get("nonstop"):
        out["nonstop"] = bool(flights) and all(f["stops"] == 0 for f in flights)
    if task.get("arrive_by"):
        out["arrive_by"] = chosen["flight"] is not None and chosen["flight"]["arrive"] <= task["arrive_by"]
    if task.get("min_rating"):
        out["rating"] = chosen["hotel"] is not None and chosen["hotel"]["rating"] >= task["min_rating"]
    if "cuisine" in task:
        out["cuisine"] = (
            chosen["restaurant"] is not None and chosen["restaurant"]["cuisine"] == task["cuisine"]
        )
    if "category" in task:
        out["category"] = (
            chosen["attraction"] is not None and chosen["attraction"]["category"] == task["category"]
        )
    out["party"] = bool(bookings) and all(b["people"] == task["party"] for b in bookings)
    out["budget"] = bool(bookings) and sum(b["cost"] for b in bookings) <= task["budget"]
    expected = sorted("flight" if p == "return_flight" else p for p in parts)
    out["nothing_else"] = bool(bookings) and sorted(b["kind"] for b in bookings) == expected
    return {name: out[name] for name in CONSTRAINTS if name in out}


def make_task(task_type: str, seed: int) -> tuple[int, dict[str, Any]]:
    """A world seed and a task of ``task_type`` in that world, both fixed by ``seed``."""
    rng = random.Random(seed)
    while True:
        world_seed = rng.randrange(2**31)
        task = draw(task_type, make_world(world_seed), rng)
        if task is not None:
            return world_seed, task
