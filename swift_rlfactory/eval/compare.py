"""Side-by-side tables of evaluations: EM and searches per question, per split, cell, family and shift.

    python -m swift_rlfactory.eval.compare NAME=eval-a.json NAME=eval-b.json ... [--validation [NAME=]validation.json ...]
        [--shifts NAME=eval-shifts.json ...] [--out DIR]

What it reads and writes (report.md, validation.png): docs/eval.md ("Comparing evaluations").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

GROUPS = (("by_split", "split"), ("by_cell", "split / hops"), ("by_family", "family"))


def load(specs: list[str]) -> dict[str, dict[str, Any]]:
    """``NAME=FILE`` pairs -> name: metrics, in the order given."""
    runs = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            raise SystemExit(f"expected NAME=FILE, got {spec!r}")
        runs[name] = json.loads(Path(path).read_text())
    return runs


def questions(runs: dict[str, dict[str, Any]], key: str, group: str) -> str:
    """The group's question count: one number when every run that has the group agrees, else each
    run's (``base 5, new 10``: the runs did not score the same questions, so their EMs do not compare)."""
    counts = {
        name: metrics[key][group]["questions"]
        for name, metrics in runs.items()
        if group in (metrics.get(key) or {})
    }
    if len(set(counts.values())) == 1:
        return str(next(iter(counts.values())))
    return ", ".join(f"{name} {n}" for name, n in counts.items())


def failures(runs: dict[str, dict[str, Any]]) -> str:
    """A line naming the runs with failed episodes (scored 0, so their EM is too low), or nothing."""
    failed = {name: m.get("failed_episodes", 0) for name, m in runs.items() if m.get("failed_episodes", 0)}
    if not failed:
        return ""
    listed = ", ".join(f"{name} {n}" for name, n in failed.items())
    return f"failed episodes (counted as wrong): {listed}\n\n"


def table(runs: dict[str, dict[str, Any]], key: str, title: str) -> str:
    """One markdown table: a row per group, EM (change vs the first run) and searches per run."""
    names = list(runs)
    base = runs[names[0]].get(key) or {}
    groups = sorted({g for metrics in runs.values() for g in metrics.get(key) or {}})
    head = [title, "questions"] + [f"{n} EM" for n in names] + [f"{n} searches" for n in names]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for group in groups:
        cells = [group, questions(runs, key, group)]
        for name in names:
            metrics = (runs[name].get(key) or {}).get(group)
            if metrics is None:
                cells.append("")
                continue
            change = ""
            if name != names[0] and group in base:
                change = f" ({metrics['em'] - base[group]['em']:+.3f})"
            cells.append(f"{metrics['em']:.3f}{change}")
        for name in names:
            metrics = (runs[name].get(key) or {}).get(group)
            cells.append("" if metrics is None else f"{metrics['tool_calls']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def shift_table(runs: dict[str, dict[str, Any]]) -> str:
    """The evals of ``swift-rlfactory eval --shifts`` side by side: a row for the original set and one per
    shift, EM (change vs the first run) and searches per run, then each run's alarms, one line each."""
    names = list(runs)
    keys = {key for metrics in runs.values() for key in metrics}
    shifts = sorted(
        {k.split("/")[1] for k in keys if k.startswith("shift/") and k.endswith("/em")} - {"worst"}
    )
    head = ["set", "questions"] + [f"{n} EM" for n in names] + [f"{n} searches" for n in names]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    base = runs[names[0]]
    for label, em_key, calls_key, count_key in [
        ("original", "em", "tool_calls", "questions"),
        *((s, f"shift/{s}/em", f"shift/{s}/tool_calls", f"shift/{s}/questions") for s in shifts),
    ]:
        counts = {str(m[count_key]) for m in runs.values() if m.get(count_key) is not None}
        cells = [label, ", ".join(sorted(counts))]
        for name in names:
            em, base_em = runs[name].get(em_key), base.get(em_key)
            change = f" ({em - base_em:+.3f})" if name != names[0] and None not in (em, base_em) else ""
            cells.append("" if em is None else f"{em:.3f}{change}")
        cells += [_number(runs[name].get(calls_key), "{:.2f}") for name in names]
        lines.append("| " + " | ".join(cells) + " |")
    for name in names:
        worst, em = runs[name].get("shift/worst/name"), runs[name].get("shift/worst/em")
        lines.append(
            f"\n{name}: worst shift {worst} ({_number(em, '{:.3f}')})" if worst else f"\n{name}: no shift"
        )
        for alarm in runs[name].get("shift/alarms") or []:
            lines.append(
                f"- ALARM {alarm['shift']}: EM {alarm['em']:.3f}, {alarm['baseline'] - alarm['em']:.3f} below "
                f"the {alarm['against']}'s {alarm['baseline']:.3f} (margin {alarm['margin']:g})"
            )
    return "\n".join(lines) + "\n"


def _number(value: Any, form: str) -> str:
    return "" if value is None else form.format(value)


def plot_validation(validations: list[str], out: Path) -> None:
    """Validation EM and searches per question against the GRPO step, one line per arm (NAME=validation.json
    or a bare path), each arm's chosen checkpoint marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    for spec in validations:
        name, _, path = spec.rpartition("=")
        data = json.loads(Path(path).read_text())
        scores, best = data["scores"], data["best"]
        label = name or "validation"
        steps = [s["step"] for s in scores]
        (line,) = top.plot(steps, [s["em"] for s in scores], "o-", label=f"{label}: EM (greedy)")
        top.plot([best["step"]], [best["em"]], "*", color=line.get_color(), markersize=14,
                 label=f"{label}: chosen checkpoint")  # fmt: skip
        bottom.plot(steps, [s["tool_calls"] for s in scores], "o-", label=f"{label}: searches / question")
    top.set_ylabel("exact match")
    bottom.set_xlabel("GRPO step")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    top.set_title("DeepSearch GRPO from the SFT model: validation split")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main(argv: list[str] | None = None) -> None:
    """Print and write report.md; draw validation.png when asked."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", help="NAME=eval.json, the baseline first")
    parser.add_argument(
        "--validation", nargs="+", metavar="[NAME=]validation.json",
        help="validation.json of h200.sh's validate phase, one per GRPO arm",
    )  # fmt: skip
    parser.add_argument(
        "--shifts", nargs="+", metavar="NAME=eval.json",
        help="evals run with --shifts (the first is the baseline): the original and each shift side by side",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    runs = load(args.runs)
    args.out.mkdir(parents=True, exist_ok=True)
    text = failures(runs) + "\n".join(table(runs, key, title) for key, title in GROUPS)
    if args.shifts:
        shifted = load(args.shifts)
        text += "\nPhrasing shifts\n\n" + failures(shifted) + shift_table(shifted)
    (args.out / "report.md").write_text(text)
    print(text, end="")
    if args.validation is not None:
        plot_validation(args.validation, args.out / "validation.png")


if __name__ == "__main__":
    main()
