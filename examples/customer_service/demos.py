"""Scripted demonstrations for SFT: the oracle agent (shop/oracle.py) talking with the scripted customer.

Each of the first ``--n`` train rows becomes one conversation through the episode loop training and eval
run (``run_episode``), with the environment's real tools on its own episode state and its own customer
(``user:``, the scripted one of env.yaml): the customer's turns included, the tool observations exactly as
the rollout shows them, and the customer's final stop message left out (SFT rows end on an assistant turn). A conversation
is kept only when it reaches the goal without a policy violation. The system message is the one the
``rlfactory`` scheduler puts in front of every rollout: the environment's prompt with the tool schemas
rendered by the template's agent template (``--template``), so SFT and GRPO see one prompt format.

    python examples/customer_service/demos.py --n 1000 --out /tmp/cs-sft.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from shop.oracle import oracle
from shop.rewards import goal, violation_count

from swift_rlfactory.adapters.swift_template import template_by_name, with_system_prompt
from swift_rlfactory.env.environment import Environment
from swift_rlfactory.rollout.episode import run_episode

HERE = Path(__file__).parent


async def demonstrations(env: Environment, rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The oracle's conversation for each row that reached its goal within the policy, heard by the
    environment's own customer (``user:``), without the system message and the customer's stop message."""
    kept = []
    for i, row in enumerate(rows):
        fields = {k: v for k, v in row.items() if k != "messages"}
        async with env.episodes.scope(f"demo-{i}", fields) as state:
            trajectory = await run_episode(
                row["messages"], oracle(row["user_goal"]), env.executor, env.max_turns,
                row=fields, state=state, user=env.user,
            )  # fmt: skip
            if (
                trajectory.stop_reason == "user_stop"
                and goal(trajectory) == 1.0
                and not violation_count(trajectory)
            ):
                kept.append(trajectory.messages[:-1])
    return kept


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="the first N train rows")
    parser.add_argument("--dataset", type=Path, default=HERE / "data" / "train.jsonl")
    parser.add_argument("--env", type=Path, default=HERE / "env.yaml")
    parser.add_argument(
        "--template", default="qwen2_5", help="ms-swift template whose agent template renders the tools"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    with args.dataset.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f][: args.n]
    with Environment.load(args.env) as env:
        system = with_system_prompt(
            [], template_by_name(args.template), env.system_prompt, env.tool_schemas()
        )
        kept = asyncio.run(demonstrations(env, rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        out.writelines(
            json.dumps({"messages": [*system, *turns]}, ensure_ascii=False) + "\n" for turns in kept
        )
    print(f"{len(kept)}/{len(rows)} conversations kept -> {args.out}")


if __name__ == "__main__":
    main()
