"""Per-task-type tables of a booking evaluation: success, constraints met, each constraint, tool calls, turns.

The episode's state is not in ``trajectories.jsonl``, so each episode's final itinerary is rebuilt by
replaying its successful ``book_*`` and ``cancel`` calls, in order, on a fresh world from its row (the world
is a pure function of ``world_seed``); the rebuilt itinerary is checked as the reward checked the live one::

    python examples/booking/report.py /tmp/eval-sft /tmp/eval-trained --out report.md
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from goals import CONSTRAINTS, check  # noqa: E402
from trip import Trip, setup  # noqa: E402

from swift_rlfactory.runtime.user_code import import_target  # noqa: E402

tools = import_target(str(HERE / "tools.py"), HERE)  # the module the environment loads, by its path

_CHANGES = ("book_flight", "book_hotel", "book_restaurant", "book_attraction", "cancel")


def replay(row: dict[str, Any], tool_calls: list[dict[str, Any]]) -> Trip:
    """The trip of ``row`` after the calls that changed it (those that succeeded) are made again."""
    trip = setup(row)
    for call in tool_calls:
        if call.get("tool") in _CHANGES and not call.get("error"):
            getattr(tools, call["tool"]).fn(**call["arguments"], state=trip)
    return trip


def episode(record: dict[str, Any]) -> dict[str, Any]:
    """One record's numbers: its constraints met (rebuilt), success, tool calls and turns."""
    row = record.get("row") or {}
    calls = record.get("tool_calls") or []
    met = {} if record.get("failed") else check(row["task"], replay(row, calls).snapshot())
    return {
        "group": f"{row.get('split', '?')}/{row.get('type', '?')}",
        "met": met,
        "success": float(bool(met) and all(met.values())),
        "constraints": sum(met.values()) / len(met) if met else 0.0,
        "tool_calls": len(calls),
        "turns": record.get("turns", 0),
    }


def summarize(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per ``split/type`` group and ``all``: episodes, means of the episode numbers, and each constraint's
    rate over the episodes whose task has it."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        one = episode(record)
        groups[one["group"]].append(one)
        groups[one["group"].split("/")[0] + "/all"].append(one)
    table = {}
    for name, rows in sorted(groups.items()):
        line: dict[str, Any] = {"episodes": len(rows)}
        for key in ("success", "constraints", "tool_calls", "turns"):
            line[key] = sum(r[key] for r in rows) / len(rows)
        for constraint in CONSTRAINTS:
            seen = [r["met"][constraint] for r in rows if constraint in r["met"]]
            if seen:
                line[constraint] = sum(seen) / len(seen)
        table[name] = line
    return table


def markdown(title: str, table: dict[str, dict[str, Any]]) -> str:
    """The table as Markdown: one row per group, the constraints a group does not have left blank."""
    columns = ["episodes", "success", "constraints", "tool_calls", "turns", *CONSTRAINTS]
    head = f"### {title}\n\n| group | " + " | ".join(columns) + " |\n|" + " --- |" * (len(columns) + 1) + "\n"
    body = ""
    for name, line in table.items():
        cells = [str(line["episodes"])] + [f"{line[c]:.2f}" if c in line else "" for c in columns[1:]]
        body += f"| {name} | " + " | ".join(cells) + " |\n"
    return head + body


def main(argv: list[str] | None = None) -> None:
    """Print (and with ``--out`` write) one table per evaluation folder, and ``--json`` the numbers."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "evals", nargs="+", type=Path, help="folders of swift-rlfactory eval (trajectories.jsonl)"
    )
    parser.add_argument("--out", type=Path, help="write the Markdown tables here")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    text, numbers = "", {}
    for folder in args.evals:
        records = {}
        for line in (folder / "trajectories.jsonl").read_text().splitlines():
            record = json.loads(line)
            records[(record["index"], record["sample"])] = record  # the last line of an episode counts
        numbers[folder.name] = summarize(list(records.values()))
        text += markdown(folder.name, numbers[folder.name]) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=1))


if __name__ == "__main__":
    main()
