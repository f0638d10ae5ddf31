"""The orders world: a small seeded shop (customers, products with variants, orders) made per episode.

``make_world(seed)`` is deterministic; ``setup(row)`` (the environment's ``episode.setup``) builds the
world of the row's ``world_seed``, so every trajectory gets its own copy and a reward can rebuild the
untouched world to compare against.
"""

from __future__ import annotations

import random
from typing import Any

FIRST = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lena", "Mo", "Nia"]
LAST = ["Ruiz", "Okafor", "Li", "Novak", "Smith", "Haddad", "Berg", "Sato", "Costa", "Klein", "Moreau"]
PRODUCTS = {
    "lamp": ("Desk Lamp", ["black", "white", "blue"], 30.0),
    "mug": ("Coffee Mug", ["red", "green", "grey"], 12.0),
    "tee": ("T-Shirt", ["S", "M", "L", "XL"], 18.0),
    "boots": ("Hiking Boots", ["40", "41", "42", "43", "44"], 95.0),
    "bag": ("Backpack", ["black", "olive", "navy"], 55.0),
    "kettle": ("Electric Kettle", ["steel", "white"], 40.0),
    "chair": ("Office Chair", ["mesh", "leather"], 150.0),
    "phone_case": ("Phone Case", ["clear", "black", "pink"], 15.0),
}
STATUSES = ["pending", "pending", "shipped", "delivered", "delivered", "cancelled"]
STREETS = ["Oak St", "Pine Ave", "Elm Rd", "Lake Blvd", "Hill Ln", "River Way"]
CUSTOMERS_PER_WORLD = 10


def make_world(seed: int) -> dict[str, Any]:
    """The world of ``seed``: customers, products and orders as plain JSON (the episode's state)."""
    rng = random.Random(seed)
    products = {
        key: {
            "name": name,
            "variants": {
                f"{key}-{v.lower()}": {"option": v, "price": price, "in_stock": True} for v in options
            },
        }
        for key, (name, options, price) in PRODUCTS.items()
    }
    for product in products.values():  # one variant out of stock somewhere, so exchanges can fail
        rng.choice(list(product["variants"].values()))["in_stock"] = rng.random() < 0.7
    people = rng.sample([(f, s) for f in FIRST for s in LAST], CUSTOMERS_PER_WORLD)
    customers, orders = {}, {}
    for i, (first, last) in enumerate(people):
        cid = f"C{seed % 1000:03d}{i:02d}"
        customers[cid] = {
            "id": cid,
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@example.com",
            "zip": f"{rng.randint(10000, 99999)}",
            "address": f"{rng.randint(1, 999)} {rng.choice(STREETS)}",
        }
        kinds = rng.sample(
            list(products), 4
        )  # no product in two orders of one customer: descriptions are unique
        for j, status in enumerate(rng.sample(STATUSES, 3)):
            oid = f"#W{rng.randint(1000000, 9999999)}"
            items = []
            for k, key in enumerate([kinds[j], kinds[3]] if j == 0 else [kinds[j]]):
                vid = rng.choice(list(products[key]["variants"]))
                items.append({"item_id": f"{oid[2:]}-{k + 1}", "product": key, "variant": vid})
            orders[oid] = {
                "id": oid,
                "customer": cid,
                "status": status,
                "items": items,
                "address": customers[cid]["address"],
                "total": sum(products[it["product"]]["variants"][it["variant"]]["price"] for it in items),
            }
    return {"customers": customers, "products": products, "orders": orders, "log": [], "identified": None}


def setup(row: dict[str, Any]) -> dict[str, Any]:
    """The episode's state: the world of the row's ``world_seed``."""
    return make_world(int(row["world_seed"]))
