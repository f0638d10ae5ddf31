"""Write the customer-service tasks: data/train.jsonl, data/test.jsonl (held-out goals) and data/ood.jsonl.

Train and test draw the five trained task types (cancel, return, exchange, address, status) on disjoint
worlds; ood holds the two types never trained on (decline: the customer says no at the confirmation;
cancel_shipped: a request the policy refuses, to be transferred). In train (demonstrations, GRPO rows and
val), --typos of the customers who give an email mistype it once, so that the demonstrations show the agent
recovering from a failed lookup; test and ood goals are left as drawn. Deterministic for a given --seed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from shop.tasks import OOD_TYPES, TRAIN_TYPES, add_email_typos, make_rows

HERE = Path(__file__).parent


def build(seed: int, n_train: int, n_test: int, n_ood: int, typos: float = 0.4) -> dict[str, list[dict]]:
    """The three splits; a test or ood world never appears in train."""
    splits = {
        "train": add_email_typos(make_rows("train", n_train, seed, TRAIN_TYPES), typos, seed + 3),
        "test": make_rows("test", n_test, seed + 1, TRAIN_TYPES),
        "ood": make_rows("ood", n_ood, seed + 2, OOD_TYPES),
    }
    seen = {row["world_seed"] for row in splits["train"]}
    for name in ("test", "ood"):
        splits[name] = [row for row in splits[name] if row["world_seed"] not in seen]
    return splits


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--test", type=int, default=200)
    parser.add_argument("--ood", type=int, default=100)
    parser.add_argument(
        "--typos", type=float, default=0.4, help="share of train's email customers who mistype it once"
    )
    parser.add_argument("--out", type=Path, default=HERE / "data")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in build(args.seed, args.train, args.test, args.ood, args.typos).items():
        with (args.out / f"{name}.jsonl").open("w", encoding="utf-8") as out:
            out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        print(f"{len(rows)} rows -> {args.out / name}.jsonl")


if __name__ == "__main__":
    main()
