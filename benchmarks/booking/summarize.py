"""The booking run's tables and curves from the files benchmarks/booking/h200.sh wrote into one folder.

Reads report-{base,sft,trained-s*}.json (examples/booking/report.py's numbers, per split/type), the
validation-s*.json choices and the GRPO step logs (logging-s*-v*.jsonl); writes summary.md (success,
constraints met, tool calls and turns per split and task type for each model; the issue-34 target on test
and ood) and curves.png (training reward and success per step, one line per seed)::

    python benchmarks/booking/summarize.py RESULTS_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # benchmarks/: seed_curves
from seed_curves import plot_seeds, step_rows  # noqa: E402

METRICS = ("success", "constraints", "tool_calls", "turns")
SUCCESS_KEY = "rlfactory/reward.py:success"


def load_reports(folder: Path) -> dict[str, dict[str, Any]]:
    """Model name -> report table, base and sft first, then the trained seeds."""
    order = {"base": 0, "sft": 1}
    found = {}
    for path in folder.glob("report-*.json"):
        [found[path.stem.removeprefix("report-")]] = json.loads(path.read_text()).values()  # {folder: table}
    return dict(sorted(found.items(), key=lambda kv: (order.get(kv[0], 2), kv[0])))


def table(reports: dict[str, dict[str, Any]], metric: str) -> str:
    """One Markdown table of ``metric``: a row per split/type, a column per model (and the trained mean)."""
    models = list(reports)
    trained = [m for m in models if m.startswith("trained")]
    groups = sorted(
        {g for r in reports.values() for g in r}, key=lambda g: (g.split("/")[0], g.endswith("/all"), g)
    )
    head = ["group", *models, *(["trained mean"] if len(trained) > 1 else [])]
    lines = [f"| {' | '.join(head)} |", "|" + " --- |" * len(head)]
    for group in groups:
        values = [reports[m].get(group, {}).get(metric) for m in models]
        cells = [f"{v:.2f}" if v is not None else "" for v in values]
        if len(trained) > 1:
            seeds = [reports[m][group][metric] for m in trained if group in reports[m]]
            cells.append(f"{sum(seeds) / len(seeds):.2f}" if seeds else "")
        lines.append(f"| {group} | {' | '.join(cells)} |")
    return "\n".join(lines)


def target(reports: dict[str, dict[str, Any]]) -> str:
    """Issue 34's learning target: trained test success >= the best baseline + 0.15, no loss on ood."""
    trained = [m for m in reports if m.startswith("trained")]
    baselines = [m for m in ("base", "sft") if m in reports]
    if not trained or not baselines:
        return "target: not computable (a trained seed or a baseline is missing)"
    out = []
    for split, margin in (("test", 0.15), ("ood", 0.0)):
        group = f"{split}/all"
        best = max(reports[m].get(group, {}).get("success", 0.0) for m in baselines)
        seeds = [reports[m].get(group, {}).get("success", 0.0) for m in trained]
        ok = all(s >= best + margin for s in seeds)
        out.append(
            f"- {split}: trained success {', '.join(f'{s:.3f}' for s in seeds)} vs best baseline {best:.3f} "
            f"(needs >= +{margin:.2f} on every seed): {'met' if ok else 'NOT met'}"
        )
    return "\n".join(out)


def curves(folder: Path) -> Path | None:
    """curves.png: the training reward and success per step of each seed; None without step logs."""
    by_seed = step_rows(folder.glob("logging-s*-v*.jsonl"), lambda log: log.stem.split("-")[1])
    if not by_seed:
        return None
    panels = (("reward", "reward (train)"), (SUCCESS_KEY, "success (train)"))
    return plot_seeds(folder / "curves.png", by_seed, panels)


def main(folder: Path) -> None:
    """Write summary.md (and curves.png) into ``folder`` and print the summary."""
    reports = load_reports(folder)
    parts = ["# Booking run summary", "", "## Target", "", target(reports)]
    for metric in METRICS:
        parts += ["", f"## {metric}", "", table(reports, metric)]
    for choice in sorted(folder.glob("validation-s*.json")):
        best = json.loads(choice.read_text())["best"]
        parts += [
            "",
            f"{choice.stem}: step {best['step']} ({best['checkpoint']}), val success {best['success']:.3f}",
        ]
    if curves(folder):
        parts += ["", "![curves](curves.png)"]
    (folder / "summary.md").write_text("\n".join(parts) + "\n")
    print("\n".join(parts))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
