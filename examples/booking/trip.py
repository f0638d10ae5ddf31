"""One trajectory's travel agency: the world's database, the bookings made so far, the money spent, a notebook.

``Trip`` holds the state and does every search and booking as a method returning short text; a request it
cannot do raises :class:`BookingError` (the tool turns it into an error observation). ``setup(row)`` and
``teardown(trip)`` are the environment's ``episode:`` hooks. Reusable by any example on this world.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from world import make_world

MAX_LISTED = 6  # lines a search returns: the prompt of a 0.5B model stays short
KINDS = {"F": "flight", "H": "hotel", "R": "restaurant", "A": "attraction"}
_TABLES = {"flight": "flights", "hotel": "hotels", "restaurant": "restaurants", "attraction": "attractions"}
_CAPACITY = {"flight": "seats", "hotel": "rooms", "restaurant": "tables", "attraction": "tickets"}


class BookingError(ValueError):
    """A request the agency refuses (unknown id, sold out, a bad date): shown to the model as an error."""


def describe(kind: str, item: dict[str, Any]) -> str:
    """One search-result line for ``item`` of ``kind``."""
    left = item[_CAPACITY[kind]]
    if kind == "flight":
        stops = "nonstop" if item["stops"] == 0 else "1 stop"
        seats = f"{left} seats left" if left else "sold out"
        return (
            f"{item['id']} {item['origin']}->{item['destination']} {item['date']} {item['depart']}-{item['arrive']} "
            f"{stops} ${item['price']}/seat {seats}"
        )
    if kind == "hotel":
        rooms = f"{left} rooms left" if left else "sold out"
        return f"{item['id']} {item['name']} rating {item['rating']} ${item['price']}/night {rooms}"
    if kind == "restaurant":
        tables = f"{left} tables left" if left else "fully booked"
        return f"{item['id']} {item['name']} {item['cuisine']} rating {item['rating']} ${item['price']}/person {tables}"
    tickets = f"{left} tickets left" if left else "sold out"
    return f"{item['id']} {item['name']} {item['category']} rating {item['rating']} ${item['price']}/person {tickets}"


class Trip:
    """The per-trajectory state: ``world`` (its capacities change as bookings are made), ``task`` (the row's
    task, or ``None``), ``bookings`` (dicts with ``id``, ``kind``, ``item``, ``date``, ``people``,
    ``nights``, ``cost``), ``spent``, ``notes`` and ``closed`` (set by teardown). Methods are safe to call from the tool threads of one
    turn at once."""

    def __init__(self, world: dict[str, Any], task: dict[str, Any] | None = None):
        self.world = world
        self.task = task
        self.bookings: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.spent = 0
        self.closed = False
        self._next = 1
        self._lock = threading.Lock()
        self._index = {item["id"]: (kind, item) for kind, table in _TABLES.items() for item in world[table]}

    def snapshot(self) -> dict[str, Any]:
        """The state as plain JSON (what a reward in another process reads as ``trajectory.state``)."""
        with self._lock:
            return copy.deepcopy(
                {"world": self.world, "task": self.task, "bookings": self.bookings, "notes": self.notes,
                 "spent": self.spent}
            )  # fmt: skip

    def item(self, item_id: str, kind: str) -> dict[str, Any]:
        """The world's ``kind`` with id ``item_id``; :class:`BookingError` naming the search tool if none."""
        found = self._index.get(str(item_id).strip().upper())
        if found is None or found[0] != kind:
            raise BookingError(f"no {kind} with id {item_id!r}; use search_{_TABLES[kind]} to find ids")
        return found[1]

    def search(self, kind: str, city: str, **match: Any) -> str:
        """Items of ``kind`` in ``city`` (for flights: ``origin`` is ``city``, plus ``destination`` and
        ``date`` in ``match``) whose fields equal ``match`` (empty values ignored), cheapest first."""
        city_key = "origin" if kind == "flight" else "city"
        self._check_city(city)
        wanted = {city_key: self._city(city), **{k: v for k, v in match.items() if v not in ("", None)}}
        if kind == "flight":
            self._check_city(wanted["destination"])
            wanted["destination"] = self._city(wanted["destination"])
            self._check_date(wanted.get("date", ""))
        items = [
            i
            for i in self.world[_TABLES[kind]]
            if all(str(i[k]).lower() == str(v).lower() for k, v in wanted.items())
        ]
        if not items:
            return f"no {_TABLES[kind]} match"
        items.sort(key=lambda i: (i["price"], i["id"]))
        return "\n".join(describe(kind, i) for i in items[:MAX_LISTED])

    def book(self, kind: str, item_id: str, people: int, date: str, nights: int = 1) -> str:
        """Book ``people`` places (seats, guests of one room, a table, tickets) of an item on ``date``."""
        item = self.item(item_id, kind)
        people, nights = _count(people, "people", 1, 9), _count(nights, "nights", 1, 5)
        date = item["date"] if kind == "flight" else self._check_date(date)
        need = people if kind in ("flight", "attraction") else 1
        cost = item["price"] * (nights if kind == "hotel" else people)
        with self._lock:
            left = item[_CAPACITY[kind]]
            if left < need:
                raise BookingError(f"{item['id']} has only {left} {_CAPACITY[kind]} left, {need} needed")
            item[_CAPACITY[kind]] -= need
            booking = {
                "id": f"B{self._next}", "kind": kind, "item": item["id"], "date": date, "people": people,
                "nights": nights if kind == "hotel" else 0, "cost": cost, "taken": need,
            }  # fmt: skip
            self._next += 1
            self.bookings.append(booking)
            self.spent += cost
            spent = self.spent
        what = f"{nights} nights from {date}" if kind == "hotel" else date
        return (
            f"booked {booking['id']}: {kind} {item['id']} {what} for {people}, ${cost}; spent ${spent} in all"
        )

    def cancel(self, booking_id: str) -> str:
        """Cancel a booking: its places go back and its cost is refunded."""
        with self._lock:
            wanted = str(booking_id).strip().upper()
            booking = next((b for b in self.bookings if b["id"] == wanted), None)
            if booking is None:
                raise BookingError(f"no booking {booking_id!r}; view_itinerary lists the bookings")
            self.bookings.remove(booking)
            kind, item = self._index[booking["item"]]
            item[_CAPACITY[kind]] += booking["taken"]
            self.spent -= booking["cost"]
            return f"cancelled {booking['id']}, refunded ${booking['cost']}; spent ${self.spent} in all"

    def itinerary(self) -> str:
        """Every booking on one line each, and the money spent."""
        with self._lock:
            lines = [
                f"{b['id']} {b['kind']} {b['item']} {b['date']}"
                + (f" {b['nights']} nights" if b["nights"] else "")
                + f" for {b['people']} ${b['cost']}"
                for b in self.bookings
            ]
            return "\n".join([*lines, f"spent ${self.spent}"]) if lines else "no bookings; spent $0"

    def note(self, text: str) -> str:
        """Keep a line in the notebook."""
        with self._lock:
            self.notes.append(str(text)[:300])
            return f"noted ({len(self.notes)} notes)"

    def read_notes(self) -> str:
        """The notebook, one numbered line a note."""
        with self._lock:
            return "\n".join(f"{n}. {t}" for n, t in enumerate(self.notes, 1)) or "no notes"

    def _city(self, name: str) -> str:
        return next(c for c in self.world["cities"] if c.lower() == str(name).strip().lower())

    def _check_city(self, name: str) -> None:
        if not any(c.lower() == str(name).strip().lower() for c in self.world["cities"]):
            raise BookingError(f"unknown city {name!r}; cities: {', '.join(self.world['cities'])}")

    def _check_date(self, date: str) -> str:
        if str(date).strip() not in self.world["dates"]:
            raise BookingError(
                f"no service on {date!r}; dates are {self.world['dates'][0]} to {self.world['dates'][-1]}"
            )
        return str(date).strip()


def _count(value: Any, name: str, low: int, high: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BookingError(f"{name} must be a whole number, not {value!r}") from None
    if not low <= number <= high:
        raise BookingError(f"{name} must be from {low} to {high}, not {number}")
    return number


def setup(row: dict[str, Any]) -> Trip:
    """``episode.setup``: the row's own ``world`` (a snapshot, copied) if it has one, else the world of its
    ``world_seed`` (0 without one: a scratch episode); and the row's task."""
    world = copy.deepcopy(row["world"]) if "world" in row else make_world(int(row.get("world_seed", 0)))
    return Trip(world, row.get("task"))


def teardown(trip: Trip) -> None:
    """``episode.teardown``: close the trip; a tool call that comes after its trajectory ended is refused."""
    trip.closed = True
