"""Learning curve of GRPO from the base model: accuracy and tool calls per checkpoint, per split.

    python benchmarks/rl_from_base/curve.py EVAL_DIR [--out DIR] [--log logging-v0-*.jsonl]

Reads every ``eval-step-<N>.json`` in EVAL_DIR (``metrics.json`` of ``swift-rlfactory eval``; step 0 is
the base model) and writes ``curve.json`` (one row per step), ``curve.md`` (the same as a table, with the
change against step 0) and ``curve.png`` (EM and tool calls per question against the step; with
``--log``, the sampled training EM of ms-swift's ``logging.jsonl`` too). An eval grouped by ``split``
(``heldout`` and ``ood`` in ``h200.sh``) gets one column and one line per split: the in-distribution
held-out problems and the OOD ones are never averaged together.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

_STEP = re.compile(r"eval-step-(\d+)\.json$")


def curve_rows(eval_dir: Path) -> list[dict[str, Any]]:
    """One row per evaluated step, in step order: EM, tool calls per question, EM per family."""
    rows = []
    for path in eval_dir.glob("eval-step-*.json"):
        found = _STEP.search(path.name)
        if not found:
            continue
        metrics = json.loads(path.read_text())
        families = {name: group["em"] for name, group in (metrics.get("by_family") or {}).items()}
        splits = metrics.get("by_split") or {"all": metrics}
        rows.append(
            {
                "step": int(found[1]),
                "questions": metrics["questions"],
                "em": metrics["em"],
                "tool_calls": metrics["tool_calls"],
                "tool_error_rate": metrics.get("tool_error_rate"),
                "em_by_family": families,
                "by_split": {
                    name: {"questions": g["questions"], "em": g["em"], "tool_calls": g["tool_calls"]}
                    for name, g in splits.items()
                },
            }
        )
    return sorted(rows, key=lambda r: r["step"])


def _splits(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({name for row in rows for name in row["by_split"]})


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: per step and split, EM, its change against step 0 and tool calls per question."""
    splits = _splits(rows)
    base = rows[0]["by_split"] if rows and rows[0]["step"] == 0 else {}
    head = ["step"] + [f"{s} {c}" for s in splits for c in ("EM", "change vs base", "tool calls / question")]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in rows:
        cells = [str(row["step"])]
        for name in splits:
            group = row["by_split"].get(name)
            if group is None:
                cells += ["", "", ""]
                continue
            change = f"{group['em'] - base[name]['em']:+.3f}" if name in base else ""
            cells += [f"{group['em']:.3f}", change, f"{group['tool_calls']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], out: Path, log: Path | None) -> None:
    """Held-out EM and tool calls per question by step; the training reward when a log is given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for name in _splits(rows):
        points = [(r["step"], r["by_split"][name]) for r in rows if name in r["by_split"]]
        top.plot([s for s, _ in points], [g["em"] for _, g in points], "o-", label=f"{name} EM (greedy)")
        bottom.plot(
            [s for s, _ in points],
            [g["tool_calls"] for _, g in points],
            "o-",
            label=f"{name}: tool calls / question",
        )
    if log is not None:
        logged = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
        logged = [r for r in logged if "reward" in r]
        top.plot(
            [int(str(r["global_step/max_steps"]).split("/")[0]) for r in logged],
            [r.get("rlfactory/em", float("nan")) for r in logged],
            alpha=0.4,
            label="training EM (sampled, per step)",
        )
    top.set_ylabel("exact match")
    bottom.set_xlabel("GRPO step")
    for ax in (top, bottom):
        ax.legend(loc="best", fontsize=8)
        ax.grid(alpha=0.3)
    top.set_title("GRPO from base Qwen2.5-Coder-0.5B-Instruct: arithmetic + calculator")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main(argv: list[str] | None = None) -> None:
    """Write curve.json, curve.md and curve.png."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("eval_dir", type=Path)
    parser.add_argument("--out", type=Path, help="output folder (default EVAL_DIR)")
    parser.add_argument("--log", type=Path, help="ms-swift logging.jsonl of the run")
    args = parser.parse_args(argv)
    out = args.out or args.eval_dir
    out.mkdir(parents=True, exist_ok=True)
    rows = curve_rows(args.eval_dir)
    if not rows:
        raise SystemExit(f"no eval-step-*.json in {args.eval_dir}")
    (out / "curve.json").write_text(json.dumps(rows, indent=1) + "\n")
    (out / "curve.md").write_text(table(rows))
    print(table(rows), end="")
    try:
        plot(rows, out / "curve.png", args.log)
    except ImportError:  # the GPU image may lack matplotlib: plot the returned files on the CPU machine
        print("matplotlib is not installed here: run this script again where it is for curve.png")


if __name__ == "__main__":
    main()
