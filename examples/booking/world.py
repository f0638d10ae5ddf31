"""The booking world: a small, seeded travel database (cities, flights, hotels, restaurants, attractions).

``make_world(seed)`` returns plain JSON (lists of dicts), the same bytes for the same seed, small enough to be
made again for every trajectory (a few milliseconds) and copied whole into a rollout server's JSON snapshot.
"""

from __future__ import annotations

import random
from typing import Any

CITY_NAMES = (
    "Avalon", "Brightwater", "Cedar Bay", "Dunmore", "Eastport", "Fairhaven", "Glenrock", "Harborview",
    "Ironwood", "Juniper", "Kingsbridge", "Lakeside",
)  # fmt: skip
CITIES_PER_WORLD = 4
DATES = tuple(f"2027-05-{day:02d}" for day in range(1, 7))
CUISINES = ("italian", "japanese", "indian", "mexican", "thai", "french")
CATEGORIES = ("museum", "park", "tour", "show")
FLIGHTS_PER_ROUTE_AND_DAY = 3
HOTELS_PER_CITY = 4
RESTAURANTS_PER_CITY = 5
ATTRACTIONS_PER_CITY = 4

_HOTEL_WORDS = (
    ("Grand", "Royal", "Cozy", "Blue", "Old", "Sunny"),
    ("Inn", "Lodge", "Suites", "Hotel", "Rooms"),
)
_RESTAURANT_WORDS = (
    ("Golden", "Little", "Green", "Red", "Silver", "Happy"),
    ("Table", "Kitchen", "Spoon", "Garden"),
)
_ATTRACTION_NAMES = {
    "museum": ("History Museum", "Art Museum", "Science Museum"),
    "park": ("City Park", "Botanic Garden", "River Park"),
    "tour": ("Old Town Walk", "Harbor Cruise", "Bike Tour"),
    "show": ("Jazz Club", "Puppet Theater", "Opera House"),
}


def make_world(seed: int) -> dict[str, Any]:
    """The world of ``seed``: ``cities``, ``dates`` and the ``flights``, ``hotels``, ``restaurants`` and
    ``attractions`` lists, each item a dict with an ``id`` (``F…``, ``H…``, ``R…``, ``A…``) and its capacity
    (``seats``, ``rooms``, ``tables``, ``tickets``)."""
    rng = random.Random(seed)
    cities = rng.sample(CITY_NAMES, CITIES_PER_WORLD)
    world: dict[str, Any] = {
        "seed": seed,
        "cities": cities,
        "dates": list(DATES),
        "flights": _flights(rng, cities),
        "hotels": [],
        "restaurants": [],
        "attractions": [],
    }
    for city in cities:
        world["hotels"] += [_hotel(rng, city) for _ in range(HOTELS_PER_CITY)]
        cuisines = rng.sample(CUISINES, 3)
        world["restaurants"] += [_restaurant(rng, city, cuisines) for _ in range(RESTAURANTS_PER_CITY)]
        world["attractions"] += [_attraction(rng, city) for _ in range(ATTRACTIONS_PER_CITY)]
    for key, prefix in (("hotels", "H"), ("restaurants", "R"), ("attractions", "A")):
        for number, item in enumerate(world[key], start=1):
            item["id"] = f"{prefix}{number}"
    return world


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _flights(rng: random.Random, cities: list[str]) -> list[dict[str, Any]]:
    flights = []
    for origin in cities:
        for destination in cities:
            if origin == destination:
                continue
            base_price, base_minutes = rng.randint(60, 220), rng.randint(60, 200)
            for date in DATES:
                for _ in range(FLIGHTS_PER_ROUTE_AND_DAY):
                    stops = int(rng.random() < 0.4)
                    depart = rng.randrange(6 * 60, 20 * 60, 5)
                    minutes = base_minutes + stops * rng.randrange(60, 180, 5)
                    factor = rng.uniform(0.65, 0.95) if stops else rng.uniform(0.9, 1.5)
                    flights.append({
                        "id": f"F{len(flights) + 101}", "origin": origin, "destination": destination,
                        "date": date, "depart": _clock(depart), "arrive": _clock(min(depart + minutes, 23 * 60 + 55)),
                        "stops": stops, "price": round(base_price * factor), "seats": rng.choice((0, 1, 2, 3, 4, 6, 9)),
                    })  # fmt: skip
    return flights


def _hotel(rng: random.Random, city: str) -> dict[str, Any]:
    name = f"{rng.choice(_HOTEL_WORDS[0])} {city} {rng.choice(_HOTEL_WORDS[1])}"
    rating = round(rng.uniform(2.5, 4.9), 1)
    price = round(rng.randint(50, 110) + (rating - 2.5) * rng.randint(20, 50))
    return {
        "city": city,
        "name": name,
        "price": price,
        "rating": rating,
        "rooms": rng.choice((0, 1, 2, 3, 5)),
    }


def _restaurant(rng: random.Random, city: str, cuisines: list[str]) -> dict[str, Any]:
    name = f"{rng.choice(_RESTAURANT_WORDS[0])} {rng.choice(_RESTAURANT_WORDS[1])}"
    return {
        "city": city, "name": name, "cuisine": rng.choice(cuisines), "price": rng.randint(12, 60),
        "rating": round(rng.uniform(3.0, 4.9), 1), "tables": rng.choice((0, 1, 2, 4)),
    }  # fmt: skip


def _attraction(rng: random.Random, city: str) -> dict[str, Any]:
    category = rng.choice(CATEGORIES)
    return {
        "city": city, "name": rng.choice(_ATTRACTION_NAMES[category]), "category": category,
        "price": rng.choice((0, 5, 10, 15, 20, 30, 40)), "rating": round(rng.uniform(3.0, 4.9), 1),
        "tickets": rng.choice((0, 2, 4, 8, 20)),
    }  # fmt: skip
