"""Write the booking world's splits as JSONL rows in ms-swift's ``messages`` format.

Each row: ``messages`` (the user's request), ``task`` (the hard constraints, for the reward), ``world_seed``
(the world the episode's setup builds), ``type`` and ``split``. train, val and test draw the five train task
types in turn; ood draws the two types never trained on (goals.OOD_TYPES). Every row's world and task come
from ``(--seed, split, index)`` alone, so the files are the same bytes on every run::

    python examples/booking/build_data.py                  # data/{train,val,test,ood}.jsonl
    python examples/booking/build_data.py --train 50 --out /tmp/booking
"""

from __future__ import annotations

import argparse
import json
import sys
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from goals import OOD_TYPES, TRAIN_TYPES, make_task, text  # noqa: E402

HERE = Path(__file__).parent
SPLITS = {"train": 2000, "val": 100, "test": 200, "ood": 200}


def row(split: str, index: int, seed: int, attempt: int = 0) -> dict[str, Any]:
    """Row ``index`` of ``split``: its type cycles through the split's types; its world and task are fixed
    by ``(seed, split, index, attempt)``."""
    types = sorted(OOD_TYPES if split == "ood" else TRAIN_TYPES)
    task_type = types[index % len(types)]
    world_seed, task = make_task(task_type, zlib.crc32(f"{seed}/{split}/{index}/{attempt}".encode()))
    return {
        "messages": [{"role": "user", "content": text(task)}],
        "type": task_type, "split": split, "world_seed": world_seed, "task": task,
    }  # fmt: skip


def build(out: Path, counts: dict[str, int], seed: int = 0) -> dict[str, Path]:
    """Write ``counts[split]`` rows of each split to ``out/<split>.jsonl``; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, n in counts.items():
        if n <= 0:
            continue
        paths[split] = out / f"{split}.jsonl"
        seen: set[str] = set()  # a request worded like an earlier one is drawn again: each row is scored once
        with paths[split].open("w", encoding="utf-8") as f:
            for index in range(n):
                attempt, drawn = 0, row(split, index, seed)
                while drawn["messages"][0]["content"] in seen:
                    attempt += 1
                    drawn = row(split, index, seed, attempt)
                seen.add(drawn["messages"][0]["content"])
                f.write(json.dumps(drawn) + "\n")
    return paths


def main(argv: list[str] | None = None) -> None:
    """Parse the counts and write the splits."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for split, n in SPLITS.items():
        parser.add_argument(f"--{split}", type=int, default=n, help=f"rows of {split} (default {n})")
    parser.add_argument("--n", type=int, help="rows of every split (overrides the per-split counts)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "data")
    args = parser.parse_args(argv)
    counts = {split: args.n if args.n is not None else getattr(args, split) for split in SPLITS}
    for split, path in build(args.out, counts, args.seed).items():
        print(f"{split}: {counts[split]} rows -> {path}")


if __name__ == "__main__":
    main()
