"""Warm-start demonstrations for the two-lookup task: the oracle's episodes as ms-swift SFT rows.

The oracle looks up both crates of the question in one turn (as the system prompt's example shows), then
answers ``<answer>SUM</answer>`` of the counts the tool returned. It plays each row through the real
environment (env.yaml: server.py over MCP, latency 0) in the evaluation's episode loop (``run_row``), so every
tool message is the observation a rollout shows; the system prompt carries the tool schemas as the
template's agent template renders them, as the ``rlfactory`` scheduler does. Episodes ``em`` scores below 1
are left out. Rows come from data.py with ``--seed`` (1: not the benchmark's own questions, seed 0)::

    python benchmarks/environments/lookup/demos.py --n 300 --template qwen2_5 --out /tmp/lookup-sft.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from data import LABEL, rows  # noqa: E402

from swift_rlfactory.adapters.swift_template import template_by_name, with_system_prompt  # noqa: E402
from swift_rlfactory.env.environment import Environment  # noqa: E402
from swift_rlfactory.eval.runner import run_row  # noqa: E402
from swift_rlfactory.rewards import rules  # noqa: E402
from swift_rlfactory.rollout.episode import Generation, Messages  # noqa: E402
from swift_rlfactory.tools.calls import HERMES, hermes_call  # noqa: E402
from swift_rlfactory.trajectory import Trajectory  # noqa: E402

HERE = Path(__file__).parent


class Oracle:
    """The oracle as an evaluation policy (``eval.runner.Policy``) and its own episode model: both lookups
    first, then the sum of the tool messages. Stateless: each turn is read off the conversation."""

    max_length = None  # no context check: the oracle's conversations are short
    max_tokens = 0
    call_format = HERMES
    tokens_used = None

    def __init__(self, template: Any) -> None:
        self.template = template

    def render_prompt(
        self, messages: Messages, system_prompt: str | None, tools: list[dict] | None
    ) -> Messages:
        """The rollout's first prompt: the system prompt and tool schemas merged in by the template."""
        return with_system_prompt(messages, self.template, system_prompt, tools)

    def new_episode(self) -> Oracle:
        """The oracle again: it keeps no state between turns."""
        return self

    async def generate(self, messages: Messages) -> Generation:
        """The calls for the question's crates, or, once the tool has answered, the sum of its answers."""
        counts = [int(m["content"]) for m in messages if m["role"] == "tool"]
        if counts:
            return Generation(f"<answer>{sum(counts)}</answer>")
        question = [m["content"] for m in messages if m["role"] == "user"][-1]
        return Generation("\n".join(hermes_call("lookup", {"crate": c}) for c in LABEL.findall(question)))


async def demonstrations(env: Environment, oracle: Oracle, dataset: list[dict[str, Any]]) -> list[Trajectory]:
    """The oracle's episode of each row that it answers right, in row order."""
    tools, played = env.tool_schemas(), []
    for start in range(0, len(dataset), 64):  # a few dozen episodes in flight: quick, and bounded
        chunk = dataset[start : start + 64]
        played += await asyncio.gather(
            *(
                run_row(row, oracle, env, env.max_turns, tools, key=f"demo-{start + i}")
                for i, row in enumerate(chunk)
            )
        )
    return [t for t in played if t.stop_reason == "answer" and rules.em(t) == 1.0]


def main(argv: list[str] | None = None) -> None:
    """Write one SFT row per question the oracle answers."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=300, help="questions demonstrated")
    parser.add_argument("--seed", type=int, default=1, help="data.py's seed for the questions")
    parser.add_argument("--template", default="qwen2_5", help="ms-swift template of the model to train")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    os.environ["RLFACTORY_BENCH_LATENCY"] = "0"  # env.yaml's server latency: demonstrations need none
    with Environment.load(HERE / "env.yaml") as env:
        demos = asyncio.run(
            demonstrations(env, Oracle(template_by_name(args.template)), rows(args.n, args.seed))
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        for trajectory in demos:
            out.write(json.dumps({"messages": trajectory.messages}, ensure_ascii=False) + "\n")
    calls = sum(len(t.tool_calls) for t in demos) / max(len(demos), 1)
    print(f"{len(demos)}/{args.n} questions demonstrated, {calls:.1f} tool calls each -> {args.out}")


if __name__ == "__main__":
    main()
