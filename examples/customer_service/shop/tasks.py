"""Customer goals on the orders world: what the customer wants, the facts only they hold, and the end state.

A goal is plain JSON in the row's ``user_goal``; ``make_goal`` draws one of a task type from a world,
``add_email_typos`` marks customers who mistype their email once (``typed_email`` is what they type), and
``expected_orders`` applies a goal to the untouched world: the orders as they must end.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from .world import PRODUCTS, STREETS, make_world

TRAIN_TYPES = ("cancel", "return", "exchange", "address", "status")
OOD_TYPES = ("decline", "cancel_shipped")  # never trained on: say no at the confirmation; a shipped order
NEEDS = {  # the order status each type acts on
    "cancel": "pending",
    "decline": "pending",
    "exchange": "pending",
    "address": "pending",
    "return": "delivered",
    "status": None,
    "cancel_shipped": "shipped",
}
OPENINGS = {
    "cancel": "Hi, I'd like to cancel one of my orders.",
    "decline": "Hello, I'm thinking about cancelling an order.",
    "return": "Hi, I want to return something I received.",
    "exchange": "Hi, I'd like to swap an item in my order for a different option.",
    "address": "Hello, I need to change the shipping address of an order.",
    "status": "Hi, can you tell me the status and total of my order?",
    "cancel_shipped": "Hi, please cancel my order, I don't need it any more.",
}


def make_goal(world: dict[str, Any], task_type: str, rng: random.Random) -> dict[str, Any] | None:
    """A goal of ``task_type`` for a random customer of ``world``, or ``None`` when the draw has no such order."""
    want = NEEDS[task_type]
    orders = [o for o in world["orders"].values() if want is None or o["status"] == want]
    if task_type == "status":
        orders = [o for o in orders if o["status"] != "cancelled"]
    if not orders:
        return None
    order = rng.choice(sorted(orders, key=lambda o: o["id"]))
    customer = world["customers"][order["customer"]]
    first = order["items"][0]
    goal = {
        "type": task_type,
        "customer_id": customer["id"],
        "email": customer["email"],
        "name": customer["name"],
        "zip": customer["zip"],
        "identify_by": rng.choice(["email", "name_zip"]),
        "order_id": order["id"],
        "knows_order_id": rng.random() < 0.6,
        "description": f"the order with the {PRODUCTS[first['product']][0]}",
        "confirm": task_type != "decline",
        "opening": OPENINGS[task_type],
    }
    if task_type == "return":
        items = rng.sample(order["items"], rng.randint(1, len(order["items"])))
        goal["items"] = sorted(it["item_id"] for it in items)
        goal["item_names"] = [
            PRODUCTS[it["product"]][0] for it in sorted(items, key=lambda it: it["item_id"])
        ]
    elif task_type == "exchange":
        variants = world["products"][first["product"]]["variants"]
        options = [v for v, spec in variants.items() if v != first["variant"] and spec["in_stock"]]
        if not options:
            return None
        goal["item_id"], goal["new_variant"] = first["item_id"], rng.choice(options)
        goal["item_name"] = PRODUCTS[first["product"]][0]
        goal["new_option"] = variants[goal["new_variant"]]["option"]
    elif task_type == "address":
        goal["address"] = f"{rng.randint(1, 999)} {rng.choice(STREETS)}, Apt {rng.randint(1, 30)}"
    elif task_type == "status":
        goal["status"], goal["total"] = order["status"], f"{order['total']:.2f}"
    return goal


EMAIL_TYPOS = ("drop", "swap", "domain")  # a letter left out, two letters swapped, the domain misspelt


def add_email_typos(rows: list[dict[str, Any]], rate: float, seed: int) -> list[dict[str, Any]]:
    """Mark ``rate`` of the rows whose customer gives an email as mistyping it the first time (the goal's
    ``email_typo``: one of ``EMAIL_TYPOS``), drawn from their own ``seed`` so the goals' draws stay as
    they were; the demonstrations then show the agent recovering from a failed lookup."""
    rng = random.Random(seed)
    for row in rows:
        if row["user_goal"]["identify_by"] == "email" and rng.random() < rate:
            row["user_goal"]["email_typo"] = rng.choice(EMAIL_TYPOS)
    return rows


def typed_email(goal: dict[str, Any]) -> str:
    """The email as the customer first types it: with the goal's ``email_typo``, else as it is."""
    local, domain = goal["email"].split("@")
    kind, middle = goal.get("email_typo"), len(local) // 2
    if kind == "drop":
        local = local[:middle] + local[middle + 1 :]
    elif kind == "swap":  # the first pair of unlike letters from the middle on, so the email does change
        i = next(i for i in range(middle, len(local)) if local[i - 1] != local[i])
        local = local[: i - 1] + local[i] + local[i - 1] + local[i + 1 :]
    elif kind == "domain":
        domain = domain[:2] + domain[3] + domain[2] + domain[4:]
    return f"{local}@{domain}"


def expected_orders(seed: int, goal: dict[str, Any]) -> dict[str, Any]:
    """The world's orders after ``goal`` is done right (and nothing else)."""
    orders = copy.deepcopy(make_world(seed)["orders"])
    order = orders[goal["order_id"]]
    kind = goal["type"]
    if kind == "cancel":
        order["status"] = "cancelled"
    elif kind == "return":
        order["status"], order["returned"] = "return requested", goal["items"]
    elif kind == "exchange":
        next(it for it in order["items"] if it["item_id"] == goal["item_id"])["variant"] = goal["new_variant"]
    elif kind == "address":
        order["address"] = goal["address"]
    return orders


def make_rows(split: str, n: int, seed: int, types: tuple[str, ...]) -> list[dict[str, Any]]:
    """``n`` rows of ``split``: task types in turn, each on the world of its own ``world_seed``."""
    rng, rows = random.Random(seed), []
    while len(rows) < n:
        task_type = types[len(rows) % len(types)]
        world_seed = rng.randint(0, 10**6)
        goal = make_goal(make_world(world_seed), task_type, rng)
        if goal is None:
            continue
        rows.append(
            {
                "messages": [{"role": "user", "content": goal["opening"]}],
                "world_seed": world_seed,
                "user_goal": goal,
                "task_type": task_type,
                "split": split,
            }
        )
    return rows
