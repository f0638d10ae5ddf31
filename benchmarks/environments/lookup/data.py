"""The two-lookup task: questions whose answer needs two crates' coin counts, which only the tool knows.

    python data.py OUT.jsonl [N]      (default 2000 rows, seed 0)

Each row asks for the total of two crates; the counts come from :func:`coins`, a fixed hash of the label,
so the MCP server and the references agree without a shared file.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys

LABEL = re.compile(r"crate-\d{4}")


def coins(crate: str) -> int:
    """The coin count of a crate label ``crate-NNNN``: 100..999, fixed by the label's SHA-256."""
    label = crate.strip().lower()
    if not LABEL.fullmatch(label):
        raise ValueError(f"unknown crate {crate!r}: labels look like crate-0421")
    return 100 + int(hashlib.sha256(label.encode()).hexdigest(), 16) % 900


def rows(n: int, seed: int = 0) -> list[dict]:
    """``n`` dataset rows ``{messages, solution}``, two different crates each."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = (f"crate-{k:04d}" for k in rng.sample(range(10000), 2))
        question = f"How many coins do {a} and {b} hold together?"
        out.append(
            {"messages": [{"role": "user", "content": question}], "solution": str(coins(a) + coins(b))}
        )
    return out


def main() -> None:
    """Write the rows as JSONL."""
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    with open(path, "w") as f:
        for row in rows(n):
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
