"""Keep the questions a policy sometimes solves: the rows GRPO can learn from.

GRPO's advantage is a reward minus its group's mean, so a question whose k samples all succeed, or all fail,
contributes no gradient (ms-swift logs the share of such groups as ``frac_reward_zero_std``). After a warm
start most training questions are always solved, and GRPO spends its steps on them for nothing. Scoring the
pool once with ``swift-rlfactory eval --samples K --temperature 1`` and keeping the rows whose solve rate
lies strictly between ``low`` and ``high`` gives a dataset of mixed groups (the offline form of DAPO's
dynamic sampling, without resampling inside every step)::

    swift-rlfactory eval --env env.yaml --model M --dataset pool.jsonl --output runs/pool --samples 4 --temperature 1
    swift-rlfactory select --eval runs/pool --dataset pool.jsonl --out grpo.jsonl

The rate is the mean of one episode metric (``em`` by default) over a question's samples.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..retrieval.qa_data import write_jsonl
from .runner import EvalLog, check_same_dataset, load_rows


def solve_rates(records: Iterable[dict[str, Any]], metric: str = "em") -> dict[int, float]:
    """Mean ``metric`` of each question's samples, by question index."""
    scores: dict[int, list[float]] = defaultdict(list)
    for record in records:
        scores[int(record["index"])].append(float(record["metrics"][metric]))
    return {index: sum(values) / len(values) for index, values in scores.items()}


def select_rows(
    rows: list[dict[str, Any]], rates: dict[int, float], low: float = 0.0, high: float = 1.0
) -> list[dict[str, Any]]:
    """Rows whose solve rate is strictly between ``low`` and ``high``; unscored rows are left out."""
    return [row for index, row in enumerate(rows) if index in rates and low < rates[index] < high]


def select(
    eval_dir: str | Path,
    dataset: str | Path,
    out: str | Path,
    metric: str = "em",
    low: float = 0.0,
    high: float = 1.0,
) -> tuple[int, int]:
    """Write the selected rows of ``dataset`` to ``out``; returns (kept, scored questions).

    Raises:
        ValueError: the evaluation log is missing, is of another dataset, or lacks ``metric``.
    """
    log = EvalLog(Path(eval_dir) / "trajectories.jsonl")
    if not log.path.exists():
        raise ValueError(f"{log.path} does not exist: run swift-rlfactory eval with --output {eval_dir}")
    done = log.load()
    rows = load_rows(dataset)
    check_same_dataset(done, rows, Path(dataset))
    try:
        rates = solve_rates(done.values(), metric)
    except KeyError:
        raise ValueError(f"{log.path}: records have no metric {metric!r}") from None
    kept = select_rows(rows, rates, low, high)
    write_jsonl(kept, out)
    return len(kept), len(rates)
