"""Training curves of GRPO runs, one line per seed: what the benchmarks' summarize.py scripts draw."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path


def step_rows(logs: Iterable[Path], seed_of: Callable[[Path], str]) -> dict[str, list[dict]]:
    """The step lines of ms-swift's ``logging.jsonl`` copies, by seed (a resumed run: one log per v* folder)."""
    by_seed: dict[str, list[dict]] = defaultdict(list)
    for log in sorted(logs):
        rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        by_seed[seed_of(log)] += [r for r in rows if "reward" in r and "global_step/max_steps" in r]
    return {seed: rows for seed, rows in by_seed.items() if rows}


def plot_seeds(path: Path, by_seed: dict[str, list[dict]], panels: Sequence[tuple[str, str]]) -> Path:
    """One panel per (metric key, title), one line per seed labelled by its key, GRPO step on x; a step
    without the metric is a gap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for seed, rows in sorted(by_seed.items()):
        steps = [int(str(r["global_step/max_steps"]).split("/")[0]) for r in rows]
        for ax, (key, _) in zip(axes[0], panels, strict=True):
            ax.plot(steps, [r.get(key, float("nan")) for r in rows], label=seed)
    for ax, (_, title) in zip(axes[0], panels, strict=True):
        ax.set_title(title)
        ax.set_xlabel("GRPO step")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
