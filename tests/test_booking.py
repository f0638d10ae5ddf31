"""The booking world (examples/booking): scripted policies driven through the real Environment (tools,
episode setup and teardown, rewards on the final state), the tools' refusals, the data builder and the
warm-start demonstrations."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from swift_rlfactory.env.environment import Environment

from .conftest import use_example

BOOKING = Path(__file__).resolve().parents[1] / "examples" / "booking"
use_example(BOOKING)

import build_data  # noqa: E402
import demos  # noqa: E402
import report as booking_report  # noqa: E402
import reward  # noqa: E402
from goals import OOD_TYPES, TRAIN_TYPES, TYPES, cheapest_plan  # noqa: E402
from oracle import do_nothing, oracle, play  # noqa: E402
from trip import Trip, setup  # noqa: E402
from world import make_world  # noqa: E402

SUCCESS, CONSTRAINTS = "reward.py:success", "reward.py:constraints"


@pytest.fixture(scope="module")
def env():
    with Environment.load(BOOKING / "env.yaml") as env:
        yield env


def rows_of(task_type: str, n: int, split: str = "test") -> list[dict]:
    split = "ood" if task_type in OOD_TYPES else split
    rows = [json.loads(line) for line in (BOOKING / "data" / f"{split}.jsonl").read_text().splitlines()]
    return [r for r in rows if r["type"] == task_type][:n]


def report(trajectory) -> dict[str, bool]:
    """The per-constraint breakdown as reward.py reports it, on the JSON copy a rollout server would send."""
    return reward.report(replace(trajectory, state=json.loads(json.dumps(trajectory.state.snapshot()))))


def play_one(env, key, row, policy):
    trajectory = asyncio.run(play(env, key, row, policy))
    assert trajectory.state.closed  # torn down after the rewards scored it
    return trajectory


@pytest.mark.parametrize("task_type", sorted(TYPES))
def test_the_oracle_meets_every_constraint_of_every_task_type(env, task_type):
    for i, row in enumerate(rows_of(task_type, 4)):
        trajectory = play_one(env, f"{task_type}-{i}", row, oracle(row))
        assert trajectory.stop_reason == "answer", trajectory.error
        assert trajectory.rewards[SUCCESS] == 1.0 and trajectory.rewards[CONSTRAINTS] == 1.0
        assert trajectory.rewards["format"] == 1.0
        met = report(trajectory)
        assert met and all(met.values()), met
        assert {"party", "budget", "nothing_else"} <= set(met)
        # every booked id was printed by a search before it was booked
        searched = "\n".join(
            c["observation"] for c in trajectory.tool_calls if c["tool"].startswith("search_")
        )
        for call in trajectory.tool_calls:
            if call["tool"].startswith("book_"):
                item = next(v for k, v in call["arguments"].items() if k.endswith("_id"))
                assert re.search(rf"^{item} ", searched, re.MULTILINE), (item, searched)
    assert env.episodes.live == 0


def test_doing_nothing_meets_no_constraint(env):
    row = rows_of("full_trip", 1)[0]
    trajectory = play_one(env, "idle", row, do_nothing(row))
    met = report(trajectory)
    assert set(met) >= {"flight", "hotel", "restaurant", "cuisine", "party", "budget", "nothing_else"}
    assert not any(met.values()), met
    assert trajectory.rewards[SUCCESS] == 0.0 and trajectory.rewards[CONSTRAINTS] == 0.0
    assert trajectory.rewards["format"] == 1.0 and trajectory.rewards["total"] == pytest.approx(0.1)


def test_a_skipped_part_fails_exactly_the_constraints_it_carries(env):
    row = rows_of("full_trip", 1)[0]  # the restaurant is left out
    trajectory = play_one(env, "skip", row, oracle(row, mistake="skip"))
    met = report(trajectory)
    failed = {name for name, ok in met.items() if not ok}
    assert failed == {"restaurant", "cuisine", "nothing_else"}, met
    assert trajectory.rewards[SUCCESS] == 0.0
    assert trajectory.rewards[CONSTRAINTS] == pytest.approx((len(met) - 3) / len(met))


def test_a_wrong_party_size_and_an_extra_booking_are_caught(env):
    # a row whose cheapest items have room for one more person, so every booking of the wrong size goes through
    def roomy(row):
        world = make_world(row["world_seed"])
        items = {i["id"]: i for key in ("flights", "hotels", "attractions") for i in world[key]}
        plan = cheapest_plan(world, row["task"])
        return all(
            items[s["item"]].get("seats", items[s["item"]].get("rooms", 9)) > row["task"]["party"]
            for s in plan
        )

    row = next(r for r in rows_of("flight_hotel", 40) if roomy(r) and r["task"]["party"] < 4)
    party = play_one(env, "party", row, oracle(row, mistake="party"))
    met = report(party)
    assert not met["party"] and met["flight"] and met["hotel"] and met["nothing_else"], met
    assert party.rewards[SUCCESS] == 0.0 and 0.0 < party.rewards[CONSTRAINTS] < 1.0

    extra = play_one(env, "extra", row, oracle(row, mistake="extra"))
    met = report(extra)
    assert not met["flight"] and not met["nothing_else"] and met["hotel"] and met["party"], met


def test_a_grpo_group_shares_its_row_never_its_state(env):
    row = rows_of("full_trip", 1)[0]

    async def group():
        policies = [oracle(row), oracle(row, mistake="skip"), oracle(row), do_nothing(row)]
        return await asyncio.gather(*(play(env, f"g{i}", row, p) for i, p in enumerate(policies)))

    trajectories = asyncio.run(group())
    assert [t.rewards[SUCCESS] for t in trajectories] == [1.0, 0.0, 1.0, 0.0]
    for t, bookings in zip(trajectories, (3, 2, 3, 0), strict=True):
        assert [b["id"] for b in t.state.snapshot()["bookings"]] == [f"B{n}" for n in range(1, bookings + 1)]
        spent = sum(b["cost"] for b in t.state.snapshot()["bookings"])
        assert t.state.snapshot()["spent"] == spent
    # each world lost only its own trajectory's seats
    world = make_world(row["world_seed"])
    flight = cheapest_plan(world, row["task"])[0]["item"]
    seats = {f["id"]: f["seats"] for f in world["flights"]}[flight]
    left = [
        {f["id"]: f["seats"] for f in t.state.snapshot()["world"]["flights"]}[flight] for t in trajectories
    ]
    assert left == [seats - row["task"]["party"]] * 3 + [seats]
    assert env.episodes.live == 0
    # a call that arrives after its trajectory was torn down is refused, never run on the old state
    from swift_rlfactory.tools.calls import ToolCall

    late = ToolCall("view_itinerary", {})
    [record] = asyncio.run(env.executor.aexecute([late], state=trajectories[0].state))
    assert record.error and "this trip is over" in record.observation


def test_the_tools_refuse_bad_requests_with_a_clear_observation(env):
    row = rows_of("flight", 1)[0]
    trip = setup(row)
    sold_out = next(f for f in trip.world["flights"] if f["seats"] == 0)
    calls = [
        ("book_flight", {"flight_id": "F9999", "passengers": 1}, "no flight with id 'F9999'"),
        ("book_flight", {"flight_id": sold_out["id"], "passengers": 1}, "has only 0 seats left"),
        (
            "book_hotel",
            {"hotel_id": "H1", "check_in": "2031-01-01", "nights": 1, "guests": 1},
            "no service on",
        ),
        ("search_hotels", {"city": "Atlantis"}, "unknown city 'Atlantis'"),
        ("cancel", {"booking_id": "B7"}, "no booking 'B7'"),
        (
            "book_hotel",
            {"hotel_id": "R1", "check_in": trip.world["dates"][0], "nights": 1, "guests": 1},
            "no hotel",
        ),
    ]
    from swift_rlfactory.tools.calls import ToolCall

    async def run():
        return await env.executor.aexecute([ToolCall(name, args) for name, args, _ in calls], state=trip)

    records = asyncio.run(run())
    for record, (_, _, words) in zip(records, calls, strict=True):
        assert record.error and words in record.observation, record.observation
    assert trip.bookings == [] and trip.spent == 0


def test_booking_and_cancelling_move_capacity_and_money_both_ways():
    trip = Trip(make_world(7))
    hotel = next(h for h in trip.world["hotels"] if h["rooms"] >= 1)
    rooms = hotel["rooms"]
    said = trip.book("hotel", hotel["id"].lower(), 2, trip.world["dates"][0], 3)
    assert said.startswith("booked B1:") and hotel["rooms"] == rooms - 1 and trip.spent == 3 * hotel["price"]
    assert "B1 hotel" in trip.itinerary() and f"spent ${trip.spent}" in trip.itinerary()
    assert trip.cancel("b1").startswith("cancelled B1") and hotel["rooms"] == rooms and trip.spent == 0
    assert trip.itinerary() == "no bookings; spent $0"
    assert (
        trip.note("ask about breakfast") == "noted (1 notes)"
        and trip.read_notes() == "1. ask about breakfast"
    )
    assert json.loads(json.dumps(trip.snapshot()))["notes"] == ["ask about breakfast"]


def test_the_environment_loads_with_its_tools_and_hides_the_state(env):
    names = {s["function"]["name"] for s in env.tool_schemas()}
    assert {"search_flights", "book_hotel", "cancel", "view_itinerary", "note", "read_notes"} <= names
    for schema in env.tool_schemas():
        assert "state" not in schema["function"]["parameters"]["properties"]
    assert env.episodes.enabled


def test_the_data_builder_is_deterministic_and_keeps_ood_types_out_of_training(tmp_path):
    counts = {"train": 30, "val": 10, "test": 10, "ood": 10}
    first = build_data.build(tmp_path / "a", counts)
    second = build_data.build(tmp_path / "b", counts)
    for split in counts:
        assert first[split].read_bytes() == second[split].read_bytes()
        committed = (BOOKING / "data" / f"{split}.jsonl").read_text().splitlines()
        assert first[split].read_text().splitlines() == committed[: counts[split]]
    for split in ("train", "val", "test"):
        types = {
            json.loads(line)["type"]
            for line in (BOOKING / "data" / f"{split}.jsonl").read_text().splitlines()
        }
        assert types == set(TRAIN_TYPES)
    ood = {json.loads(line)["type"] for line in (BOOKING / "data" / "ood.jsonl").read_text().splitlines()}
    assert ood == set(OOD_TYPES) and not ood & set(TRAIN_TYPES)
    other = build_data.build(tmp_path / "c", {"val": 10}, seed=1)
    assert other["val"].read_bytes() != first["val"].read_bytes()


def test_the_demonstrations_are_hermes_conversations_of_solved_tasks(tmp_path):
    out = tmp_path / "sft.jsonl"
    demos.main(["--n", "10", "--out", str(out)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 10
    for row in rows:
        roles = [m["role"] for m in row["messages"]]
        assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
        assert "<tools>" in row["messages"][0]["content"] and "book_flight" in row["messages"][0]["content"]
        assert "<tool_call>" in row["messages"][2]["content"] and "tool" in roles
        assert re.fullmatch(r"<answer>(B\d+ ?)+</answer>", row["messages"][-1]["content"])


def test_the_report_rebuilds_each_itinerary_from_the_logged_calls(env, tmp_path):
    rows = [*rows_of("full_trip", 2), *rows_of("round_trip", 1)]
    policies = [oracle(rows[0]), oracle(rows[1], mistake="skip"), oracle(rows[2], mistake="party")]
    records = []
    for i, (row, policy) in enumerate(zip(rows, policies, strict=True)):
        trajectory = play_one(env, f"report-{i}", row, policy)
        records.append({**trajectory.to_dict(), "index": i, "sample": 0})
        assert booking_report.episode(records[-1])["met"] == report(
            trajectory
        )  # the replay is the live state
    (tmp_path / "trained").mkdir()
    (tmp_path / "trained" / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    booking_report.main(
        [str(tmp_path / "trained"), "--json", str(tmp_path / "n.json"), "--out", str(tmp_path / "t.md")]
    )
    table = json.loads((tmp_path / "n.json").read_text())["trained"]
    assert table["test/full_trip"]["episodes"] == 2 and table["test/full_trip"]["success"] == 0.5
    assert table["test/full_trip"]["restaurant"] == 0.5 and table["ood/round_trip"]["success"] == 0.0
    assert (
        table["test/all"]["tool_calls"] == 11 / 2
        and "| ood/round_trip | 1 |" in (tmp_path / "t.md").read_text()
    )


def test_a_row_may_carry_its_own_world_and_every_episode_gets_a_copy(env):
    world = make_world(3)
    world["hotels"] = [
        {"id": "H1", "city": world["cities"][0], "name": "Only Inn", "price": 50, "rating": 4.5, "rooms": 1}
    ]
    row = {"world": world, "task": None}
    first, second = setup(row), setup(row)
    assert first.book("hotel", "H1", 2, world["dates"][0], 1).startswith("booked B1:")
    assert second.search("hotel", world["cities"][0]).endswith(
        "1 rooms left"
    )  # its own copy still has the room
    assert world["hotels"][0]["rooms"] == 1 and "sold out" in first.search("hotel", world["cities"][0])
