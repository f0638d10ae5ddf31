"""Why questions fail: each episode of an evaluation sorted into one kind of outcome, per model.

    python -m swift_rlfactory.eval.failures deepsearch sft=ds/trajectories-sft.jsonl.gz grpo=ds/trajectories-trained.jsonl.gz
    python -m swift_rlfactory.eval.failures arithmetic step-0=ar/trajectories-step-0.jsonl.gz step-75=ar/trajectories-step-75.jsonl.gz

What each task's kinds of failure are: docs/eval.md ("Why questions fail").
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from swift_rlfactory.retrieval.format import parse_hits
from swift_rlfactory.rewards.rules import extract_answer
from swift_rlfactory.runs.log import iter_trajectories

Episode = dict[str, Any]

DEEPSEARCH = (
    "right",
    "first search short",
    "another name of the bridge passage",
    "a title of the 2nd search the passage does not name",
    "answer's article found, another title answered",
    "something else answered",
    "no answer",
)
ARITHMETIC = (
    "right",
    "no tool call",
    "only failed calls",
    "right result, not answered",
    "non-integer result",
    "wrong expression",
)


def final_answer(episode: Episode) -> str | None:
    """The last ``<answer>`` the model wrote, stripped; ``None`` when it wrote none."""
    return extract_answer(
        " ".join(m["content"] for m in episode["messages"] if m["role"] == "assistant" and m.get("content"))
    )


def two_hop_scored(row: dict[str, Any]) -> bool:
    """Whether an episode's row is a two-hop question of test or holdout (what the two-hop target counts)."""
    return row.get("hops") == 2 and row.get("split") in ("test", "holdout")


def named_runs(specs: list[str]) -> list[tuple[str, Path]]:
    """``NAME=PATH`` arguments as ``(NAME, PATH)``; a bare ``PATH`` is named by its file name."""
    runs = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        runs.append((name, Path(path)) if sep else (Path(spec).name, Path(spec)))
    return runs


def deepsearch_kind(episode: Episode) -> str | None:
    """The outcome of a two-hop test or holdout episode; ``None`` for every other question."""
    row = episode["row"]
    if not two_hop_scored(row):
        return None
    if episode["rewards"].get("em") == 1:
        return "right"
    gold, bridge = row["solution"], row["support"][0]
    hits = [parse_hits(call.get("observation") or "") for call in episode["tool_calls"]]
    first = hits[0] if hits else {}
    second = hits[1] if len(hits) > 1 else {}
    answer = final_answer(episode)
    if gold not in first.get(bridge, ""):
        return "first search short"
    if gold in second:
        return "answer's article found, another title answered"
    if answer is None:
        return "no answer"
    if answer in first[bridge]:
        return "another name of the bridge passage"
    if answer in second:
        return "a title of the 2nd search the passage does not name"
    return "something else answered"


def arithmetic_kind(episode: Episode) -> str | None:
    """The outcome of a GSM-Symbolic episode; ``None`` for every other question."""
    row = episode["row"]
    if row.get("family") != "gsm_symbolic":
        return None
    if episode["rewards"].get("em") == 1:
        return "right"
    calls = episode["tool_calls"]
    results = [(c.get("observation") or "").split("\n")[0].strip() for c in calls if not c.get("error")]
    if not calls:
        return "no tool call"
    if not results:
        return "only failed calls"
    if row["solution"] in results:
        return "right result, not answered"
    try:
        last = float(results[-1])
    except ValueError:
        return "wrong expression"
    return "non-integer result" if not last.is_integer() else "wrong expression"


def table(runs: list[tuple[str, Path]], kind: Callable[[Episode], str | None], kinds: tuple[str, ...]) -> str:
    """A markdown table: one row per run, one column per kind, plus the number of questions looked at."""
    lines = [f"| model | questions | {' | '.join(kinds)} |", "| --- " * (len(kinds) + 2) + "|"]
    for name, path in runs:
        counts = Counter(k for k in map(kind, iter_trajectories(path)) if k is not None)
        lines.append(f"| {name} | {sum(counts.values())} | {' | '.join(str(counts[k]) for k in kinds)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("task", choices=("deepsearch", "arithmetic"))
    parser.add_argument("runs", nargs="+", help="NAME=trajectories.jsonl[.gz]")
    args = parser.parse_args(argv)
    runs = named_runs(args.runs)
    if args.task == "deepsearch":
        print(table(runs, deepsearch_kind, DEEPSEARCH))
    else:
        print(table(runs, arithmetic_kind, ARITHMETIC))


if __name__ == "__main__":
    main()
