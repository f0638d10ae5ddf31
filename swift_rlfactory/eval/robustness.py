"""The robustness check of ``swift-rlfactory eval --shifts``: the set scored again under each phrasing shift.

Each shift's set is scored into ``OUTPUT/shifts/<name>-seed<seed>/`` as an eval of its own; this module
compares it with the original on the same questions and with a reference run, raises alarms, and adds
``shift/...`` keys to ``OUTPUT/metrics.json``. Rules and keys: docs/eval.md#robustness-under-phrasing-shifts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from swift_rlfactory.data.qa import write_jsonl
from swift_rlfactory.runs.eval_log import EvalLog
from swift_rlfactory.runs.folder import METRICS

from .metrics import summarize
from .runner import current_records, load_dataset, skipped_row
from .shifts import Shift, resolve_shifts, shift_row

ALARM_EXIT = 3  # the exit code of an alarm with --fail-on-alarm
_SLACK = 1e-9  # a drop of exactly the margin is not past it


@dataclass
class ShiftScore:
    """One shift's scores: ``em``/``f1`` of the shifted set, ``em_original`` of the original on the same
    questions, ``questions`` the questions it applied to (of ``of``)."""

    name: str
    questions: int
    of: int
    em: float | None = None
    f1: float | None = None
    em_original: float | None = None
    tool_calls: float | None = None


@dataclass
class Alarm:
    """A score more than ``margin`` below a baseline: the original's, or the reference run's."""

    shift: str  # a shift's name, or "original" for the unshifted set
    em: float
    against: str  # "original" or "reference"
    baseline: float
    margin: float

    def text(self) -> str:
        """One line saying what fell, below what, by how much."""
        what = "the original set" if self.shift == "original" else f"shift {self.shift}"
        base = "the original's on the same questions" if self.against == "original" else "the reference's"
        return (
            f"{what}: EM {self.em:.4f} is {self.baseline - self.em:.4f} below {base} ({self.baseline:.4f}), "
            f"more than the margin {self.margin:g}"
        )


def check_options(shifts: str | None, reference: Path | None) -> tuple[list[Shift], dict[str, Any] | None]:
    """The shifts ``--shifts`` names and the reference run's metrics: ``ValueError`` before any model
    loads when either is wrong."""
    chosen = resolve_shifts(shifts) if shifts else []
    return chosen, read_reference(reference) if reference else None


def read_reference(path: Path) -> dict[str, Any]:
    """The ``metrics.json`` of an earlier eval (the file or its folder), which holds an ``em``."""
    path = Path(path).expanduser()
    file = path / METRICS if path.is_dir() else path
    try:
        metrics = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"--reference {path}: not an eval's metrics.json ({exc})") from None
    if not isinstance(metrics, dict) or not isinstance(metrics.get("em"), int | float):
        raise ValueError(f"--reference {file}: holds no EM (an eval's metrics.json has one)")
    return metrics


@dataclass
class ShiftReport:
    """What :func:`run_shifts` found: the exit code, and the keys it adds to the run's ``metrics.json``."""

    code: int
    metrics: dict[str, Any]


def run_shifts(
    options: Any,
    console: Console,
    score: Callable[[Any], int],
    requires: Mapping[str, Sequence[str]],
) -> ShiftReport:
    """Score ``options`` (an ``EvalOptions``) by ``score``, then each shift's set, and report.

    The code is ``score``'s 1 when an episode failed anywhere, else :data:`ALARM_EXIT` for an alarm with
    ``fail_on_alarm``, else 0. ``requires``: the fields the environment's rewards read (as the eval loads
    the set with), so the shifted sets hold the same questions.
    """
    chosen, reference = check_options(options.shifts, options.reference)
    failed = score(options)
    out = Path(options.output)
    rows = load_dataset(options.dataset, options.limit, requires=requires)
    results = []
    for shift in chosen:
        folder = out / shift_folder(shift.name, options.shift_seed)
        dataset = _write_shifted(rows, shift, options.shift_seed, folder / "dataset.jsonl")
        if dataset is None:
            console.print(f"shift {escape(shift.name)}: applies to none of the {len(rows)} questions")
            results.append(ShiftScore(shift.name, 0, len(rows)))
            continue
        console.print(f"[bold]shift {escape(shift.name)}[/bold]: {escape(shift.description)}")
        failed |= score(
            replace(options, dataset=dataset, output=folder, limit=None, shifts=None, reference=None)
        )
        results.append(_shift_score(shift.name, folder, out, rows, options.samples))
    original = json.loads((out / METRICS).read_text(encoding="utf-8"))
    alarms = find_alarms(original, results, reference, options.shift_margin)
    summary = shift_metrics(results, alarms)
    summary["shift_check"] = {
        "shifts": [s.name for s in chosen],
        "seed": options.shift_seed,
        "margin": options.shift_margin,
        "reference": str(Path(options.reference).expanduser().resolve()) if options.reference else None,
    }
    console.print(shifts_table(original, results, reference))
    for alarm in alarms:
        console.print(f"[bold red]ALARM[/bold red] {escape(alarm.text())}", highlight=False)
    code = 1 if failed else ALARM_EXIT if alarms and options.fail_on_alarm else 0
    return ShiftReport(code, summary)


def shift_folder(name: str, seed: int) -> str:
    """Where, under an eval's output folder, its set under shift ``name`` (with ``seed``) is scored."""
    return f"shifts/{name}-seed{seed}"


def _write_shifted(rows: Mapping[int, dict[str, Any]], shift: Shift, seed: int, path: Path) -> Path | None:
    """The shifted set as a dataset file whose row at each position is the shifted original row of that
    position (a placeholder row where the shift does not apply), so episodes pair by ``index``."""
    shifted = {i: shift_row(row, shift, seed) for i, row in rows.items()}
    last = max((i for i, row in shifted.items() if row is not None), default=None)
    if last is None:
        return None
    absent = skipped_row(f"shift {shift.name} does not apply")
    write_jsonl([shifted.get(i) or absent for i in range(last + 1)], path)
    return path


def _records(folder: Path, rows: Mapping[int, dict[str, Any]], samples: int) -> list[dict[str, Any]]:
    """The records of ``folder``'s eval that count for ``rows`` (as the eval's own metrics count them)."""
    done = current_records(EvalLog(folder / "trajectories.jsonl").load(repair=False), rows)
    return [record for (_, sample), record in done.items() if sample < samples]


def _shift_score(
    name: str, folder: Path, out: Path, rows: Mapping[int, dict[str, Any]], samples: int
) -> ShiftScore:
    """The shift's metrics, and the original's EM on the questions the shifted set scored."""
    metrics = json.loads((folder / METRICS).read_text(encoding="utf-8"))
    shifted = load_dataset(folder / "dataset.jsonl")
    indices = {r["index"] for r in _records(folder, shifted, samples)}
    paired = [r for r in _records(out, rows, samples) if r["index"] in indices]
    return ShiftScore(
        name,
        questions=metrics.get("questions", 0),
        of=len(rows),
        em=metrics.get("em"),
        f1=metrics.get("f1"),
        em_original=summarize(paired, samples).get("em") if paired else None,
        tool_calls=metrics.get("tool_calls"),
    )


def find_alarms(
    original: Mapping[str, Any],
    results: Sequence[ShiftScore],
    reference: Mapping[str, Any] | None,
    margin: float,
) -> list[Alarm]:
    """Every score more than ``margin`` below its baselines: each shift's EM below the original's on the
    same questions, and, with a ``reference`` run's metrics, the original's EM below the reference's and
    each shift's below the reference's score of that shift (its original EM when it did not run it)."""
    alarms = []

    def check(name: str, em: float | None, against: str, baseline: float | None) -> None:
        if em is not None and baseline is not None and em < baseline - margin - _SLACK:
            alarms.append(Alarm(name, em, against, baseline, margin))

    if reference is not None:
        check("original", original.get("em"), "reference", reference.get("em"))
    for result in results:
        check(result.name, result.em, "original", result.em_original)
        if reference is not None:
            check(
                result.name,
                result.em,
                "reference",
                reference.get(f"shift/{result.name}/em", reference.get("em")),
            )
    return alarms


def shift_metrics(results: Sequence[ShiftScore], alarms: Sequence[Alarm]) -> dict[str, Any]:
    """The ``shift/...`` keys of ``metrics.json`` (stable names: the UI and ``--reference`` read them)."""
    metrics: dict[str, Any] = {}
    for r in results:
        metrics.update({
            f"shift/{r.name}/questions": r.questions,
            f"shift/{r.name}/em": r.em,
            f"shift/{r.name}/f1": r.f1,
            f"shift/{r.name}/em_original": r.em_original,
            f"shift/{r.name}/tool_calls": r.tool_calls,
        })  # fmt: skip
    scored = [r for r in results if r.em is not None]
    if scored:
        worst = min(scored, key=lambda r: r.em)  # type: ignore[arg-type, return-value]
        metrics.update({"shift/worst/em": worst.em, "shift/worst/name": worst.name})
    metrics["shift/alarms"] = [alarm.__dict__ for alarm in alarms]
    return metrics


def shifts_table(
    original: Mapping[str, Any], results: Sequence[ShiftScore], reference: Mapping[str, Any] | None
) -> Table:
    """The original and each shift side by side: questions, EM, F1, the original's EM on the same
    questions, the change, and the reference's EM."""
    table = Table(
        title="robustness under phrasing shifts",
        caption="original EM: the original set's EM on the questions the shift applies to",
        show_header=True,
        header_style="bold",
    )
    columns = ["set", "questions", "EM", "F1", "original EM", "change"]
    for name in columns + (["reference EM"] if reference is not None else []):
        table.add_column(name, justify="left" if name == "set" else "right")

    def ref(key: str) -> list[str]:
        return [] if reference is None else [_format(reference.get(key, reference.get("em")))]

    em = original.get("em")
    table.add_row("original", str(original.get("questions", "-")), _format(em), _format(original.get("f1")),
                  _format(em), "", *ref("em"))  # fmt: skip
    for r in results:
        change = None if r.em is None or r.em_original is None else r.em - r.em_original
        table.add_row(
            r.name, f"{r.questions} of {r.of}", _format(r.em), _format(r.f1), _format(r.em_original),
            "-" if change is None else f"{change:+.4f}", *ref(f"shift/{r.name}/em"),
        )  # fmt: skip
    return table


def _format(value: Any) -> str:
    return "-" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)
