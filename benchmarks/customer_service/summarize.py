"""The customer-service run's tables, target and curves from the files benchmarks/customer_service/h200.sh wrote,
and select's choice of a checkpoint on val.

    python benchmarks/customer_service/summarize.py OUT_DIR
    python benchmarks/customer_service/summarize.py --choose SFT_EVAL VAL_EVAL BEST_FILE REPORT [CHECKPOINT ...]

Reads each ``trajectories-NAME.jsonl.gz`` in OUT_DIR (base, sft, other SFT draws sft-SEED, trained-SEED;
``-model-user``: scored with the model customer), the ``validation-SEED.json`` choices and the GRPO step logs
(``logging-grpo-SEED-v*.jsonl``); writes ``summary.md`` (per split and per task type, a column per model and
the trained mean: goal success, the share of conversations with a policy violation, violations per
conversation, conversations that ended in an error, assistant turns, the customer's own ending, the failed
first lookup of the customer with the share recovered from it, and the customer's echoes of the agent; the
issue-35 target against the strongest baseline) and ``curves.png`` (training reward, goal success and
violations per step, one line per seed), and prints the summary.

``--choose`` (h200.sh select SEED): SFT_EVAL is eval-sft's folder (its val rows are step 0, the SFT model, named
"sft"); VAL_EVAL the folder of the checkpoints' val eval (one checkpoint: the folder itself; several: a folder
each, by checkpoint name). Each may be a comma-separated list, one folder per customer (scripted, model): a
candidate then counts by its worst customer (the lowest val success, the highest share with a violation), so a
customer on which every model scores the same (the scripted one, which the SFT model's demonstrations follow)
cannot hide a checkpoint that breaks on the other. A checkpoint whose share of conversations with a violation
is above step 0's by more than SELECT_VIOLATION_MARGIN (environment, 0.02: two of val's 100 conversations) is
not a candidate (issue 35's target: violations must not rise); among the rest and step 0, the best val goal
success wins, then the fewer conversations with a policy violation, then the earliest step. Writes the chosen
checkpoint (or "sft") to BEST_FILE and every score with the choice to REPORT (JSON).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # benchmarks/: seed_curves
from seed_curves import plot_seeds, step_rows  # noqa: E402

GOAL, VIOLATIONS = "shop.rewards:goal", "shop.rewards:violations"
METRICS = {
    "success": "goal success",
    "violating": "conversations with a policy violation (share)",
    "violations": "policy violations per conversation",
    "errors": "conversations ended by an error (share; e.g. the customer endpoint failed)",
    "turns": "turns per conversation",
    "customer_ended": "conversations the customer ended with its stop marker (share; else a turn limit)",
    "lookup_failed": "conversations whose first find_customer failed (share; e.g. a mangled email)",
    "recovered": "of those, the share where a later find_customer found the customer",
    "echoed": "conversations where the customer repeated the agent's words (share; each asked again once)",
}
LOOKUP = "find_customer"
MODEL_USER = "-model-user"


def read(path: Path) -> list[dict[str, Any]]:
    """The records of one eval's ``trajectories.jsonl`` (gzipped or not)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def lookups(record: dict[str, Any]) -> tuple[float, float | None]:
    """Whether the conversation's first find_customer failed, and if so whether a later one succeeded (None: no
    failed first lookup, so no recovery to count)."""
    failed = [
        bool(call.get("error")) for call in record.get("tool_calls") or [] if call.get("tool") == LOOKUP
    ]
    if not failed or not failed[0]:
        return 0.0, None
    return 1.0, float(not all(failed))


def echoed(record: dict[str, Any]) -> float | None:
    """Whether the customer repeated the agent's words in the conversation (None: no reply records it, as
    before the simulated user counted echoes)."""
    counts = [call["echoes"] for call in record.get("user_calls") or [] if "echoes" in call]
    return float(any(counts)) if counts else None


def scores(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per ``split/all`` and ``split/task_type``: episodes and the means of :data:`METRICS` (a metric a row has
    no value for, None, is the mean over the rows that have one, and absent where none has)."""
    groups: dict[str, list[dict[str, float | None]]] = defaultdict(list)
    for record in records:
        row, rewards = record.get("row") or {}, record.get("rewards") or {}
        one = {
            "success": float(rewards.get(GOAL, 0.0)),
            "violating": float(rewards.get(VIOLATIONS, 0.0) > 0),
            "violations": float(rewards.get(VIOLATIONS, 0.0)),
            "errors": float(bool(record.get("failed")) or record.get("stop_reason") == "error"),
            "turns": float(record.get("turns", 0)),
            "customer_ended": float(record.get("stop_reason") == "user_stop"),
        }
        one["lookup_failed"], one["recovered"] = lookups(record)
        one["echoed"] = echoed(record)
        split = row.get("split", "?")
        groups[f"{split}/all"].append(one)
        groups[f"{split}/{row.get('task_type', '?')}"].append(one)

    def mean(rows: list[dict[str, float | None]], metric: str) -> dict[str, float]:
        values = [r[metric] for r in rows if r[metric] is not None]
        return {metric: sum(values) / len(values)} if values else {}

    return {
        group: {"episodes": len(rows), **{k: v for m in METRICS for k, v in mean(rows, m).items()}}
        for group, rows in sorted(groups.items())
    }


def baseline(name: str) -> bool:
    """Whether a model is a baseline: the base model, the SFT model or another SFT draw (``sft-SEED``)."""
    plain = name.removesuffix(MODEL_USER)
    return plain in ("base", "sft") or plain.startswith("sft-")


def load(folder: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Model name -> its scores: base, sft and its other draws, the trained seeds, then the same with the model
    customer."""

    def order(name: str) -> tuple:
        plain = name.removesuffix(MODEL_USER)
        return (name != plain, 0 if plain == "base" else 1 if baseline(name) else 2, plain)

    found = {
        path.name.removeprefix("trajectories-").removesuffix(".jsonl.gz"): scores(read(path))
        for path in folder.glob("trajectories-*.jsonl.gz")
    }
    return dict(sorted(found.items(), key=lambda kv: order(kv[0])))


def table(models: dict[str, dict[str, dict[str, float]]], metric: str) -> str:
    """One Markdown table of ``metric``: a row per split/type, a column per model (the scripted customer's trained
    mean after its seeds; the model customer's columns last)."""
    scripted = [m for m in models if not m.endswith(MODEL_USER)]
    trained = [m for m in scripted if m.startswith("trained")]
    columns: list[tuple[str, list[str]]] = [(m, [m]) for m in scripted]
    if len(trained) > 1:
        columns.append(("trained mean", trained))
    columns += [
        (f"{m.removesuffix(MODEL_USER)}, model customer", [m]) for m in models if m.endswith(MODEL_USER)
    ]
    groups = sorted(
        {g for s in models.values() for g in s}, key=lambda g: (g.split("/")[0], g.endswith("/all"), g)
    )
    lines = [f"| group | {' | '.join(c for c, _ in columns)} |", "|" + " --- |" * (len(columns) + 1)]
    for group in groups:
        cells = []
        for _, names in columns:
            values = [models[m][group][metric] for m in names if metric in models[m].get(group, {})]
            cells.append(f"{sum(values) / len(values):.2f}" if values else "")
        lines.append(f"| {group} | {' | '.join(cells)} |")
    return "\n".join(lines)


def target(models: dict[str, dict[str, dict[str, float]]], customer: str = "") -> str:
    """Issue 35's target with one customer (``customer``: "" scripted, MODEL_USER the model): every seed's test
    success >= the strongest baseline's (base or any SFT draw, scored with that customer) + 0.15, and its share
    of test conversations with a violation not above that baseline's; ood as reported."""
    mine = [m for m in models if m.endswith(MODEL_USER) == bool(customer)]
    trained = [m for m in mine if m.startswith("trained")]
    baselines = [m for m in mine if baseline(m)]
    if not trained or not baselines:
        return "target: not computable (a trained seed or a baseline is missing)"

    def get(model: str, group: str, metric: str) -> float:
        return models[model].get(group, {}).get(metric, 0.0)

    out = []
    for split, margin in (("test", 0.15), ("ood", 0.0)):
        group = f"{split}/all"
        best = max(baselines, key=lambda m: (get(m, group, "success"), -get(m, group, "violating")))
        seeds = [get(m, group, "success") for m in trained]
        rates = [get(m, group, "violating") for m in trained]
        ok = all(s >= get(best, group, "success") + margin for s in seeds)
        calm = all(r <= get(best, group, "violating") for r in rates)
        each = ", ".join(f"{m.removesuffix(customer)} {get(m, group, 'success'):.3f}" for m in baselines)
        out.append(
            f"- {split}{'' if split == 'test' else ' (reported; not part of the target)'}: trained success "
            f"{', '.join(f'{s:.3f}' for s in seeds)} vs the strongest baseline ({best.removesuffix(customer)}) "
            f"{get(best, group, 'success'):.3f} (needs >= +{margin:.2f} on every seed): {'met' if ok else 'NOT met'}; "
            f"with a violation {', '.join(f'{r:.3f}' for r in rates)} vs {get(best, group, 'violating'):.3f} "
            f"(needs no rise): {'met' if calm else 'NOT met'}; baselines: {each}"
        )
    return "\n".join(out)


def curves(folder: Path) -> Path | None:
    """curves.png: training reward, goal success and violations per GRPO step, one line per seed; None without
    step logs."""
    by_seed = step_rows(folder.glob("logging-grpo-*-v*.jsonl"), lambda log: f"seed {log.stem.split('-')[2]}")
    if not by_seed:
        return None
    panels = (("reward", "reward (train)"), (f"rlfactory/{GOAL}", "goal success (train)"),
              (f"rlfactory/{VIOLATIONS}", "violations (train)"))  # fmt: skip
    return plot_seeds(folder / "curves.png", by_seed, panels)


def passed_over(candidate: dict[str, Any], step0: dict[str, Any], margin: float) -> bool:
    """Whether a checkpoint's share with a violation is above step 0's by more than ``margin``."""
    return round(candidate["violating"], 9) > round(step0["violating"] + margin, 9)


def choose(candidates: list[dict[str, Any]], margin: float) -> dict[str, Any]:
    """Among step 0 (the first candidate) and the checkpoints not passed over: the best val success, then the
    lower share with a violation, then the earliest step."""
    allowed = [candidates[0], *(s for s in candidates[1:] if not passed_over(s, candidates[0], margin))]
    return max(allowed, key=lambda s: (s["success"], -s["violating"], -s["step"]))


def select(sft_eval: str, val_eval: str, best_file: str, report: str, *checkpoints: str) -> None:
    """``--choose``: score the SFT model and each checkpoint on val with each customer, write the choice (module
    docstring)."""

    def val(trajectories: list[Path], step: int, checkpoint: str) -> dict[str, Any] | None:
        if not all(t.exists() for t in trajectories):
            return None
        by = [scores(read(t))["val/all"] for t in trajectories]
        worst = {"success": min(s["success"] for s in by), "violating": max(s["violating"] for s in by)}
        return {"step": step, "checkpoint": checkpoint, **by[0], **worst, "customers": by}

    sft_dirs, val_dirs = sft_eval.split(","), val_eval.split(",")
    candidates = [val([Path(d) / "trajectories.jsonl" for d in sft_dirs], 0, "sft")]
    if candidates[0] is None:
        sys.exit(f"select: no val trajectories of the SFT model in {sft_eval}")
    for ckpt in checkpoints:
        name = Path(ckpt).name if len(checkpoints) > 1 else ""
        scored = val(
            [Path(d) / name / "trajectories.jsonl" for d in val_dirs], int(ckpt.rsplit("-", 1)[1]), ckpt
        )
        if scored:
            candidates.append(scored)
    margin = float(os.environ.get("SELECT_VIOLATION_MARGIN", "0.02"))
    best = choose(candidates, margin)
    for s in candidates:
        mark = "  <- best" if s is best else ""
        if passed_over(s, candidates[0], margin):
            mark = "  (passed over: violations above step 0's + margin)"
        each = " / ".join(f"{c['success']:.3f}" for c in s["customers"])
        print(
            f"step {s['step']:>4}  val success {s['success']:.3f} ({each})  with a violation {s['violating']:.3f}{mark}"
        )
    Path(best_file).write_text(best["checkpoint"] + "\n")
    Path(report).write_text(json.dumps({"best": best, "scores": candidates}, indent=1))


def main(folder: Path) -> None:
    """Write summary.md (and curves.png) into ``folder`` and print the summary."""
    models = load(folder)
    parts = ["# Customer-service run summary", "", "## Target, the scripted customer", "", target(models)]
    if any(m.endswith(MODEL_USER) for m in models):
        parts += [
            "",
            "## Target, the model customer (the one GRPO trained with)",
            "",
            target(models, MODEL_USER),
        ]
    for metric, title in METRICS.items():
        parts += ["", f"## {title}", "", table(models, metric)]
    for choice in sorted(folder.glob("validation-*.json")):
        best = json.loads(choice.read_text())["best"]
        parts += [
            "",
            f"{choice.stem}: step {best['step']} ({best['checkpoint']}), val success {best['success']:.3f} (the "
            f"worst customer's), with a violation {best['violating']:.3f}",
        ]
    if curves(folder):
        parts += ["", "![curves](curves.png)"]
    (folder / "summary.md").write_text("\n".join(parts) + "\n", encoding="utf-8")
    print("\n".join(parts))


if __name__ == "__main__":
    if sys.argv[1] == "--choose":
        select(*sys.argv[2:])
    else:
        main(Path(sys.argv[1]))
