"""The ``rewards`` command's output: recorded trajectories scored batch by batch and printed as they are
scored (a table per batch, or one JSON object written row by row), the means added up on the way."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from swift_rlfactory.runtime import blocking

from .rescore import Recorded, RescoredRow, Tally, ascore_rows, earlier_logs


def print_rescored(
    recorded: Iterable[list[Recorded]], env: Any, path: Path, args: Any, console: Console, errors: Console
) -> int:
    """Score batches of ``recorded`` with ``env``'s rewards and print each as it is scored (``--json``: one
    JSON object, written as the rows come), so memory holds a batch of trajectories, not the log; returns
    the exit status. ``args``: the command's (``json``, ``trajectories``); ``errors``: stderr's console."""
    spec, tally, several = env.reward, Tally(env.reward.names), False
    errors_before = spec.errors
    chained = bool(earlier_logs(args.trajectories))  # a resumed run: say which run's log a line is of
    if args.json:
        head = {"file": str(path), "components": spec.names}
        sys.stdout.write(json.dumps(head, ensure_ascii=False)[:-1] + ', "rows": [')
    for batch in recorded:
        for r in batch:  # tool-verified rewards (trajectory.call_tool) run the env's tools, started on demand
            r.trajectory.tool_env = env
        rows = blocking.run(ascore_rows(batch, spec))
        if args.json:
            sys.stdout.write(
                ", " * (tally.rows > 0)
                + ", ".join(json.dumps(asdict(row), ensure_ascii=False) for row in rows)
            )
        else:
            _print_rows(rows, spec.names, env.name, chained, several, console, errors)
        tally.add(rows)
        several = True
    summary = {**tally.summary(), **spec.drain_metrics()}
    fell_back = spec.errors - errors_before
    if args.json:
        sys.stdout.write(
            f'], "summary": {json.dumps(summary, ensure_ascii=False)}, "errors": {fell_back}}}\n'
        )
        return 0
    if several and tally.rows > len(rows):
        console.print(f"{tally.rows} trajectories re-scored with {env.name!r}", markup=False)
    means = ", ".join(f"{k} {v:.3f}" for k, v in summary.items())
    console.print(f"mean: {means}", markup=False, highlight=False)
    console.print(f"read {path}", markup=False, soft_wrap=True)  # a folder's newest run: say which one
    if fell_back:
        errors.print(f"{fell_back} component scores fell back", markup=False)
    return 0


def _print_rows(
    rows: list[RescoredRow],
    components: list[str],
    env_name: str,
    chained: bool,
    more: bool,
    console: Console,
    errors: Console,
) -> None:
    """One batch's table of scores, its per-turn scores and the components that fell back."""
    title = f"{len(rows)} trajectories re-scored with {env_name!r}" + (" (continued)" if more else "")
    table = Table(title=title)
    for name in ["line", *components, "total", "recorded"]:
        table.add_column(name, justify="right", style="bold" if name == "total" else None)
    turns = Table(title="per-turn scores")
    for name in ("line", "component", "scores"):
        turns.add_column(name, justify="right" if name == "line" else "left")
    for row in rows:
        line = f"{Path(row.file).parent.name}:{row.line}" if chained else str(row.line)
        recorded_total = "" if row.recorded_total is None else f"{row.recorded_total:.3f}"
        scores = [f"{row.rewards[name]:.3f}" for name in [*components, "total"]]
        table.add_row(line, *scores, recorded_total)
        for name, values in row.turn_rewards.items():
            turns.add_row(line, name, " ".join(f"{v:.2f}" for v in values))
    console.print(table)
    if turns.row_count:
        console.print(turns)
    for row in rows:
        for name, why in row.reward_errors.items():
            errors.print(f"{row.file}:{row.line}: {name} scored its fallback: {why}", markup=False)
