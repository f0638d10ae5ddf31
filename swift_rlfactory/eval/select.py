"""Keep the questions a policy sometimes solves: the rows GRPO can learn from.

From an eval of the pool with several samples, keeps the rows whose solve rate lies strictly between
``low`` and ``high``, optionally at most N per stratum; why and how: docs/eval.md.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from swift_rlfactory.data.qa import write_jsonl
from swift_rlfactory.runs.eval_log import EvalLog, is_failed

from .runner import check_same_dataset, current_records, load_dataset


def solve_rates(records: Iterable[dict[str, Any]], metric: str = "em") -> dict[int, float]:
    """Mean ``metric`` of each question's finished samples (failed episodes are skipped), by question index."""
    scores: dict[int, list[float]] = defaultdict(list)
    for record in records:
        if not is_failed(record):
            scores[int(record["index"])].append(float(record["metrics"][metric]))
    return {index: sum(values) / len(values) for index, values in scores.items()}


def select_rows(
    rows: Mapping[int, dict[str, Any]], rates: dict[int, float], low: float = 0.0, high: float = 1.0
) -> list[dict[str, Any]]:
    """Rows (by position, :func:`~.runner.load_dataset`) whose solve rate is strictly between ``low`` and
    ``high``; unscored rows are left out."""
    return [row for index, row in rows.items() if index in rates and low < rates[index] < high]


def stratified(
    rows: list[dict[str, Any]], columns: Sequence[str], per_stratum: int, seed: int = 0
) -> list[dict[str, Any]]:
    """At most ``per_stratum`` rows of each combination of ``columns`` values, chosen at random by ``seed``.

    Rows keep their order. A row without one of the columns counts under the value ``None``.
    """
    strata: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        strata[tuple(str(row.get(c)) for c in columns)].append(index)
    rng = random.Random(seed)
    kept = {i for members in strata.values() for i in rng.sample(members, min(per_stratum, len(members)))}
    return [row for index, row in enumerate(rows) if index in kept]


def select(
    eval_dir: str | Path,
    dataset: str | Path,
    out: str | Path,
    metric: str = "em",
    low: float = 0.0,
    high: float = 1.0,
    stratify: Sequence[str] = (),
    per_stratum: int | None = None,
    seed: int = 0,
) -> tuple[int, int]:
    """Write the selected rows of ``dataset`` to ``out``; returns (kept, scored questions).

    Raises:
        ValueError: the evaluation log is missing, is of another dataset, or lacks ``metric``; a
            ``stratify`` column that no row has; ``stratify`` without ``per_stratum`` or the reverse.
    """
    if bool(stratify) != (per_stratum is not None):
        raise ValueError("--stratify and --per-stratum go together")
    log = EvalLog.in_folder(eval_dir)
    if not log.path.exists():
        raise ValueError(f"{log.path} does not exist: run swift-rlfactory eval with --output {eval_dir}")
    for what, path in (("the dataset", Path(dataset)), ("the evaluation log", log.path)):
        if Path(out).expanduser().resolve() == path.expanduser().resolve():
            raise ValueError(f"--out {out} is {what}, which selecting would overwrite: write elsewhere")
    logged = log.load(repair=False)  # an eval may be writing it now
    rows = load_dataset(dataset)
    check_same_dataset(
        logged, rows, log.path, advice=f"pass the dataset that run evaluated as --dataset, not {dataset}"
    )
    try:
        rates = solve_rates(current_records(logged, rows).values(), metric)
    except KeyError:
        raise ValueError(f"{log.path}: records have no metric {metric!r}") from None
    for column in stratify:
        if not any(column in row for row in rows.values()):
            raise ValueError(f"--stratify {column}: no row of {dataset} has that column")
    kept = select_rows(rows, rates, low, high)
    if per_stratum is not None:
        kept = stratified(kept, stratify, per_stratum, seed)
    write_jsonl(kept, out)
    return len(kept), len(rates)
