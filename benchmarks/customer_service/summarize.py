"""The customer-service results table, from the trajectories an h200.sh eval phase wrote.

    python benchmarks/customer_service/summarize.py OUT_DIR

For each ``trajectories-NAME.jsonl.gz`` in OUT_DIR: per split (test, ood) and per task type, the share of
conversations that reached the goal, the share with a policy violation, violations per conversation and
assistant turns per conversation; Markdown on stdout and ``OUT_DIR/summary.md``.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

GOAL, VIOLATIONS = "shop.rewards:goal", "shop.rewards:violations"


def table(path: Path) -> list[str]:
    """One Markdown row per group of one eval: ``name | group | n | success | violating | violations | turns``."""
    name = path.name.removeprefix("trajectories-").removesuffix(".jsonl.gz")
    groups: dict[str, list[dict]] = defaultdict(list)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            row = record.get("row", {})
            for group in (row.get("split", "?"), f"{row.get('split', '?')}/{row.get('task_type', '?')}"):
                groups[group].append(record)
    lines = []
    for group, records in sorted(groups.items()):
        n = len(records)
        rewards = [r.get("rewards", {}) for r in records]
        success = sum(x.get(GOAL, 0.0) for x in rewards) / n
        violating = sum(x.get(VIOLATIONS, 0.0) > 0 for x in rewards) / n
        violations = sum(x.get(VIOLATIONS, 0.0) for x in rewards) / n
        turns = sum(r.get("turns", 0) for r in records) / n
        lines.append(
            f"| {name} | {group} | {n} | {success:.3f} | {violating:.3f} | {violations:.2f} | {turns:.1f} |"
        )
    return lines


def main(out: Path) -> None:
    header = [
        "| model | split / task type | n | success | with a violation | violations | turns |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    rows = [line for path in sorted(out.glob("trajectories-*.jsonl.gz")) for line in table(path)]
    text = "\n".join(header + rows) + "\n"
    (out / "summary.md").write_text(text, encoding="utf-8")
    print(text, end="")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
