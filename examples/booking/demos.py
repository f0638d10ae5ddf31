"""Warm-start demonstrations for the booking world: the oracle policy's episodes as ms-swift SFT rows.

Each of the first ``--n`` train rows is played by the oracle (oracle.py: search every part, book the
cheapest plan that meets every constraint, answer with the booking ids) through the REAL environment: its
tools, its episode setup and teardown and its reward, so every observation is what training shows. Only
episodes the reward scores as a success are kept. Rows carry the environment's system prompt with the tool
schemas rendered by the template's own agent template (hermes for qwen2_5) - the system text the
``rlfactory`` scheduler puts in front of every rollout - and ``tool`` messages as the scheduler appends
them, so SFT and GRPO see one prompt format::

    python examples/booking/demos.py --n 1000 --out /tmp/booking-sft.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle import oracle, play  # noqa: E402

from swift_rlfactory.adapters.swift_template import template_by_name, with_system_prompt  # noqa: E402
from swift_rlfactory.env.environment import Environment  # noqa: E402
from swift_rlfactory.eval.runner import load_rows  # noqa: E402

HERE = Path(__file__).parent
SUCCESS = "reward.py:success"


async def demonstrations(
    env: Environment, rows: list[dict[str, Any]], system: list[dict[str, Any]]
) -> list[dict]:
    """The oracle's conversation for each row that it solves, prompt included, in row order."""

    async def one(index: int, row: dict[str, Any]) -> dict | None:
        trajectory = await play(env, f"demo-{index}", row, oracle(row), [*system, *row["messages"]])
        if trajectory.rewards.get(SUCCESS) != 1.0:
            return None
        return {"messages": trajectory.messages, "type": row["type"]}

    found = []
    for start in range(0, len(rows), 64):  # a few dozen episodes in flight: quick, and bounded
        chunk = rows[start : start + 64]
        found += await asyncio.gather(*(one(start + i, row) for i, row in enumerate(chunk)))
    return [demo for demo in found if demo is not None]


def main(argv: list[str] | None = None) -> None:
    """Write one SFT row per train row the oracle solves."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1000, help="demonstrate the first N train rows")
    parser.add_argument("--env", type=Path, default=HERE / "env.yaml")
    parser.add_argument("--dataset", type=Path, default=HERE / "data" / "train.jsonl")
    parser.add_argument("--template", default="qwen2_5", help="ms-swift template of the model to train")
    parser.add_argument("--out", type=Path, default=Path("booking-sft.jsonl"))
    args = parser.parse_args(argv)

    rows = load_rows(args.dataset, args.n)
    with Environment.load(args.env) as env:
        system = with_system_prompt(
            [], template_by_name(args.template), env.system_prompt, env.tool_schemas()
        )
        demos = asyncio.run(demonstrations(env, rows, system))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        for demo in demos:
            out.write(json.dumps(demo, ensure_ascii=False) + "\n")
    calls = sum(m["role"] == "tool" for d in demos for m in d["messages"]) / max(len(demos), 1)
    print(f"{len(demos)}/{len(rows)} rows demonstrated, {calls:.1f} tool calls each -> {args.out}")


if __name__ == "__main__":
    main()
