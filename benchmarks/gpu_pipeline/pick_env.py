"""Rank the environments the base model was probed in, best first, for GRPO from base to train in.

    python benchmarks/gpu_pipeline/pick_env.py ENV=EVAL.json [ENV=EVAL.json ...] [--min-calls 0.5]

Each EVAL.json is the eval CLI's ``metrics.json`` of the base model in ENV (``rl_from_base/h200.sh probe``:
greedy, on training problems, never on a held-out or OOD one, so the choice spends none of them). GRPO from
base learns from the samples that already earn reward, and only those that reach it through the tool
teach the tool: an environment whose base model answers from memory (fewer than ``--min-calls`` tool calls
a question) ranks below every one that calls it, whatever its EM. Within each of the two groups the higher
EM ranks first, then more tool calls. An environment whose file is missing or unreadable (its probe
failed) ranks last. Prints one ENV a line, best first, and a table of what it read on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def score(metrics: Path, min_calls: float) -> tuple[int, float, float]:
    """(calls the tool, EM, calls a question) of one probe; (-1, 0, 0) when it left no readable metrics."""
    try:
        data = json.loads(metrics.read_text())
        em, calls = float(data["em"]), float(data["tool_calls"])
    except (OSError, ValueError, KeyError, TypeError):
        return (-1, 0.0, 0.0)
    return (int(calls >= min_calls), em, calls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probes", nargs="+", metavar="ENV=EVAL.json")
    parser.add_argument("--min-calls", type=float, default=0.5)
    args = parser.parse_args(argv)
    scored = []
    for probe in args.probes:
        env, sep, metrics = probe.partition("=")
        if not sep:
            parser.error(f"{probe!r}: expected ENV=EVAL.json")
        scored.append((score(Path(metrics), args.min_calls), env))
    scored.sort(key=lambda item: item[0], reverse=True)
    for (calls_tool, em, calls), env in scored:
        state = "no metrics" if calls_tool < 0 else f"em {em:.3f}  tool calls/question {calls:.2f}"
        print(f"{env}: {state}", file=sys.stderr)
        print(env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
