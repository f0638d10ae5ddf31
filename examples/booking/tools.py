"""The booking world's tools: search, book, cancel, the itinerary and a notebook, each on its episode's Trip.

Every tool takes the trajectory's :class:`trip.Trip` as its ``EpisodeState`` (injected, never in the schema)
and returns one short line or a few; a refused request is a ``ToolError``, an error observation.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trip import BookingError, Trip  # noqa: E402

from swift_rlfactory.tools import EpisodeState, ToolError, tool  # noqa: E402


def _run(trip: Trip, action: str, *args, **kwargs) -> str:
    if trip.closed:
        raise ToolError("this trip is over: its episode has ended")
    try:
        return getattr(trip, action)(*args, **kwargs)
    except BookingError as exc:
        raise ToolError(str(exc)) from None


@tool
def search_flights(origin: str, destination: str, date: str, state: EpisodeState) -> str:
    """Flights from one city to another on a date, cheapest first.

    Args:
        origin: departure city
        destination: arrival city
        date: YYYY-MM-DD
    """
    return _run(state, "search", "flight", origin, destination=destination, date=date)


@tool
def search_hotels(city: str, state: EpisodeState) -> str:
    """Hotels in a city, cheapest first.

    Args:
        city: the city
    """
    return _run(state, "search", "hotel", city)


@tool
def search_restaurants(city: str, state: EpisodeState, cuisine: str = "") -> str:
    """Restaurants in a city, cheapest first.

    Args:
        city: the city
        cuisine: only this cuisine (optional)
    """
    return _run(state, "search", "restaurant", city, cuisine=cuisine)


@tool
def search_attractions(city: str, state: EpisodeState, category: str = "") -> str:
    """Attractions in a city (museum, park, tour, show), cheapest first.

    Args:
        city: the city
        category: only this category (optional)
    """
    return _run(state, "search", "attraction", city, category=category)


@tool
def book_flight(flight_id: str, passengers: int, state: EpisodeState) -> str:
    """Book seats on a flight.

    Args:
        flight_id: e.g. F123
        passengers: number of seats
    """
    return _run(state, "book", "flight", flight_id, passengers, "")


@tool
def book_hotel(hotel_id: str, check_in: str, nights: int, guests: int, state: EpisodeState) -> str:
    """Book one room of a hotel.

    Args:
        hotel_id: e.g. H3
        check_in: YYYY-MM-DD
        nights: number of nights
        guests: number of guests
    """
    return _run(state, "book", "hotel", hotel_id, guests, check_in, nights)


@tool
def book_restaurant(restaurant_id: str, date: str, guests: int, state: EpisodeState) -> str:
    """Book a table (paid in advance per person).

    Args:
        restaurant_id: e.g. R7
        date: YYYY-MM-DD
        guests: number of guests
    """
    return _run(state, "book", "restaurant", restaurant_id, guests, date)


@tool
def book_attraction(attraction_id: str, date: str, tickets: int, state: EpisodeState) -> str:
    """Buy tickets for an attraction.

    Args:
        attraction_id: e.g. A2
        date: YYYY-MM-DD
        tickets: number of tickets
    """
    return _run(state, "book", "attraction", attraction_id, tickets, date)


@tool
def cancel(booking_id: str, state: EpisodeState) -> str:
    """Cancel a booking and get its money back.

    Args:
        booking_id: e.g. B2
    """
    return _run(state, "cancel", booking_id)


@tool
def view_itinerary(state: EpisodeState) -> str:
    """The bookings made so far and the money spent."""
    return _run(state, "itinerary")


@tool
def note(text: str, state: EpisodeState) -> str:
    """Write a line in your notebook.

    Args:
        text: what to remember
    """
    return _run(state, "note", text)


@tool
def read_notes(state: EpisodeState) -> str:
    """Read your notebook."""
    return _run(state, "read_notes")
