"""Reward curve of a GRPO run from ms-swift's ``logging.jsonl``.

    python benchmarks/deepsearch/plot_rewards.py RUN/logging.jsonl OUT.png

Plots, per step, the total reward, its EM and format components, tool calls per trajectory and the share
of prompts whose completions all got the same reward (``frac_reward_zero_std``: those give GRPO no
gradient, so a curve stuck at 1 means learning has stopped).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SERIES = {
    "reward": "reward (total)",
    "rlfactory/em": "EM",
    "rlfactory/format": "format",
    "tools/calls_per_trajectory": "tool calls / trajectory",
    "frac_reward_zero_std": "share of groups with zero reward std",
}


def main(log: str, out: str) -> None:
    rows = [json.loads(line) for line in Path(log).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "reward" in r]
    steps = [int(str(r["global_step/max_steps"]).split("/")[0]) for r in rows]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for key in ("reward", "rlfactory/em", "rlfactory/format"):
        top.plot(steps, [r.get(key, float("nan")) for r in rows], label=SERIES[key])
    for key in ("tools/calls_per_trajectory", "frac_reward_zero_std"):
        bottom.plot(steps, [r.get(key, float("nan")) for r in rows], label=SERIES[key])
    top.set_ylabel("per-trajectory mean")
    bottom.set_xlabel("GRPO step")
    for ax in (top, bottom):
        ax.legend(loc="best", fontsize=8)
        ax.grid(alpha=0.3)
    top.set_title(Path(log).parent.name)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    main(*sys.argv[1:3])
