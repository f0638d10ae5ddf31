"""Compare each checkpoint's answers through one engine (``ROOT/one-engine/<name>``) with its own engine's.

``python compare.py ROOT ADAPTER [ADAPTER ...]`` prints JSON: per checkpoint, EM both ways and how many
questions got a different episode (any message); and how many answers differ between the first two checkpoints
through their own engines, which says whether the adapters were applied at all (equal answers everywhere
would also be what an engine ignoring its adapters gives).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def answers(folder: Path) -> dict[str, str]:
    """question -> its whole episode (every message, tool calls and observations) in ``folder``'s log."""
    out = {}
    for line in (folder / "trajectories.jsonl").read_text().split("\n"):
        if line.strip():
            record = json.loads(line)
            out[record["question"]] = json.dumps(record.get("messages"), sort_keys=True)
    return out


def main(root: str, *adapters: str) -> None:
    report: dict = {"checkpoints": {}}
    singles = {}
    for adapter in adapters:
        name = Path(adapter).name
        one = Path(root) / "one-engine" / name
        own = Path(root) / f"single-{name}"
        a, b = answers(one), answers(own)
        singles[name] = b
        report["checkpoints"][name] = {
            "em_one_engine": json.loads((one / "metrics.json").read_text())["em"],
            "em_own_engine": json.loads((own / "metrics.json").read_text())["em"],
            "questions": len(b),
            "episodes_differ": sum(a.get(q) != text for q, text in b.items()),
        }
    first, second = list(singles.values())[:2]
    report["episodes_differ_between_checkpoints"] = sum(first[q] != second.get(q) for q in first)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:])
