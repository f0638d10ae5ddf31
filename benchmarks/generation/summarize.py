"""Tables of issue 31's GPU runs from the pipeline's results folder (``pipeline.sh``).

    python benchmarks/generation/summarize.py R > tables.md

* **settings**: per colocate vLLM setting (``R/colo/TAG_rlfactory-0.jsonl``), the median of the timed steps
  (all but the first) of the step and of each ``timeline/*`` phase, the step's spread (min-max), its ratio
  to ``eager`` (today's recipes), the peak GPU memory nvidia-smi saw during the run (``R/colo/mem``) and
  ms-swift's ``memory(GiB)``, the run's wall time from ``phases.tsv`` less its steps (start-up);
* **floors**: generation against the standalone engine's replay of the same steps (``R/floor/gen-*.json``;
  the median over steps of generation / floor), train against a forward-backward of the same tokens, weight
  sync against one device copy of the merged model's and of the adapter's bytes;
* **tools**: every run of ``R/tools`` and ``R/server`` as ``summarize_colocate.py`` tabulates them, plus the
  step over (that scheduler's 0 s step + the step's longest tool chain x latency).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from summarize_colocate import load_steps, timed  # noqa: E402

PHASES = ("generation", "tools", "reward", "weight_sync", "train", "other")


def med(rows: list[dict], key: str) -> float:
    """Median of ``key`` over the rows that have it (nan if none)."""
    values = [float(r[key]) for r in rows if key in r]
    return statistics.median(values) if values else float("nan")


def peak_mib(path: Path) -> float:
    """The largest used-memory sample of an nvidia-smi trace (nan if none)."""
    values = [float(v) for v in path.read_text().split() if v.strip().isdigit()] if path.exists() else []
    return max(values) if values else float("nan")


def wall_seconds(root: Path) -> dict[str, float]:
    """Seconds each phase of ``phases.tsv`` took."""
    path = root / "phases.tsv"
    rows = [line.split("\t") for line in path.read_text().splitlines()] if path.exists() else []
    return {r[0]: float(r[3]) for r in rows if len(r) == 4}


def settings_table(root: Path) -> list[str]:
    """One row per colocate setting of the grid."""
    colo, walls = root / "colo", wall_seconds(root)
    runs = {
        p.stem.rpartition("_rlfactory")[0]: load_steps(p) for p in sorted(colo.glob("*_rlfactory-0.jsonl"))
    }
    base = statistics.median(float(r["step_time"]) for r in timed(runs["eager"])) if "eager" in runs else None
    lines = [
        "| setting | step s (min-max) | x eager | "
        + " | ".join(f"{p} s" for p in PHASES)
        + " | peak GPU MiB | ms-swift GiB | start-up s | tokens / completion | calls / traj |",
        "|---" * (len(PHASES) + 8) + "|",
    ]
    for tag, steps in runs.items():
        rows = timed(steps)
        step_times = [float(r["step_time"]) for r in rows]
        step = statistics.median(step_times)
        ratio = f"{base / step:.2f}x" if base else ""
        phases = " | ".join(f"{med(rows, f'timeline/{p}_s'):.3f}" for p in PHASES)
        start = walls.get(tag, float("nan")) - sum(float(r["step_time"]) for r in steps)
        lines.append(
            f"| {tag} | {step:.2f} ({min(step_times):.2f}-{max(step_times):.2f}) | {ratio} | {phases} "
            f"| {peak_mib(colo / 'mem' / f'{tag}_rlfactory-0.csv'):.0f} | {max(float(r['memory(GiB)']) for r in steps):.1f} "
            f"| {start:.0f} | {med(steps, 'completions/mean_length'):.1f} | {med(steps, 'tools/calls_per_trajectory'):.2f} |"
        )
    return lines


def floors_table(root: Path) -> list[str]:
    """Generation, train and weight sync of the eager and graphs runs against their floors."""
    lines = [
        "| run | phase | run median s | floor median s | run / floor (median over steps) |",
        "|---|---|---|---|---|",
    ]
    for tag in ("eager", "graphs"):
        gen_path, log = root / "floor" / f"gen-{tag}.json", root / "colo" / f"{tag}_rlfactory-0.jsonl"
        if not gen_path.exists() or not log.exists():
            continue
        floor = {int(k): v["floor_s"] for k, v in json.loads(gen_path.read_text())["steps"].items()}
        by_step = {int(r["global_step/max_steps"].split("/")[0]): r for r in load_steps(log)}
        pairs = [(float(by_step[s]["timeline/generation_s"]), f) for s, f in floor.items() if s in by_step]
        lines.append(
            f"| {tag} | generation | {statistics.median(p[0] for p in pairs):.3f} "
            f"| {statistics.median(p[1] for p in pairs):.3f} | {statistics.median(a / b for a, b in pairs):.2f} |"
        )
    train_path = root / "floor" / "train-eager.json"
    log = root / "colo" / "eager_rlfactory-0.jsonl"
    if train_path.exists() and log.exists():
        train, rows = json.loads(train_path.read_text()), timed(load_steps(log))
        run_train, run_sync = med(rows, "timeline/train_s"), med(rows, "timeline/weight_sync_s")
        for key in ("checkpointing", "no_checkpointing"):
            floor = statistics.median(train[key].values())
            lines.append(
                f"| eager | train vs fwd+bwd+AdamW ({key.replace('_', ' ')}, peak "
                f"{train[key + '_peak_gib']:.1f} GiB) | {run_train:.3f} | {floor:.3f} | {run_train / floor:.2f} |"
            )
        for key, label in (("full", "merged model"), ("adapter", "adapter")):
            nbytes, copy = train[f"{key}_bytes"], train[f"copy_{key}_s"]
            lines.append(
                f"| eager | weight sync vs one copy of the {label} ({nbytes / 2**20:.0f} MiB) "
                f"| {run_sync:.3f} | {copy:.5f} | {run_sync / copy:.0f} |"
            )
    return lines


def tools_table(folder: Path) -> list[str]:
    """Each run of a tool-latency folder: median step, phases, calls, and the step over its chain floor."""
    runs = {}
    for path in sorted(folder.glob("*.jsonl")):
        name, _, latency = path.stem.rpartition("-")
        runs[(name, float(latency))] = timed(load_steps(path))
    lines = [
        "| run | latency s | step s | generation s | tools s | train s | calls / traj | max tool turns "
        "| x sync_tools | step / (0 s step + chain floor) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (name, latency), rows in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        step = med(rows, "step_time")
        sync = name.replace(
            "rlfactory", "sync_tools"
        )  # a server-mode run against colocate's sync if it has none
        base = runs.get((sync, latency)) or runs.get((re.sub(r"server(-async)?-", "", sync), latency))
        speedup = f"{med(base, 'step_time') / step:.2f}x" if base and "rlfactory" in name else ""
        zero = runs.get((name, 0.0))
        bound = ""
        if zero and latency and all("tools/max_tool_turns" in r for r in rows):
            floor = statistics.median(
                med(zero, "step_time") + latency * float(r["tools/max_tool_turns"]) for r in rows
            )
            bound = f"{step / floor:.2f}"
        lines.append(
            f"| {name} | {latency:g} | {step:.2f} | {med(rows, 'timeline/generation_s'):.2f} "
            f"| {med(rows, 'timeline/tools_s'):.2f} | {med(rows, 'timeline/train_s'):.2f} "
            f"| {med(rows, 'tools/calls_per_trajectory'):.2f} | {med(rows, 'tools/max_tool_turns'):.0f} | {speedup} | {bound} |"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    """Print every table the results folder has data for."""
    root = Path((argv or sys.argv[1:])[0])
    sections = [("Settings (0 s latency, LEARNING_RATE=0)", settings_table), ("Floors", floors_table)]
    for title, table in sections:
        print(f"## {title}\n\n" + "\n".join(table(root)) + "\n")
    for folder in ("tools", "server"):
        if (root / folder).is_dir():
            print(f"## {folder}\n\n" + "\n".join(tools_table(root / folder)) + "\n")


if __name__ == "__main__":
    main()
