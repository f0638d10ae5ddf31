"""Evaluation metrics from the records of ``trajectories.jsonl``: pure functions, easy to check by hand.

Each metric, and why a failed episode counts as wrong while a question without a reference answer is not
scored: docs/eval.md.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from swift_rlfactory.data.answers import reference_answers
from swift_rlfactory.runs.eval_log import is_failed, trajectory_from_record

from ..rollout.metrics import tool_metrics

# tool_metrics keys that the headline metrics already report under their own names.
_HEADLINE_DUPLICATES = {"tools/calls_per_trajectory", "tools/error_rate"}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def has_reference(record: dict[str, Any]) -> bool:
    """Whether the dataset row of a log record holds a reference answer that ``em``/``f1`` score against."""
    return bool(reference_answers(record.get("row") or {}))


def episode_score(record: dict[str, Any], metric: str) -> float | None:
    """An episode's ``em`` or ``f1`` as the metrics count it: 0 for a failed episode (no answer is a wrong
    answer), ``None`` for one whose row has no reference answer (nothing to match: not scored)."""
    return _score(record, metric) if has_reference(record) else None


def _score(record: dict[str, Any], metric: str) -> float:
    """:func:`episode_score` of a record already known to have a reference answer."""
    return 0.0 if is_failed(record) else record["metrics"][metric]


def scored_fields(record: dict[str, Any]) -> dict[str, Any]:
    """A log record without its conversation, which no metric reads (``EvalLog.load(keep=...)``): the
    records of a 100 000-episode eval are held for :func:`summarize` at a fraction of their size."""
    return {**record, "messages": []} if "messages" in record else record


def summarize(records: Sequence[dict[str, Any]], samples: int) -> dict[str, Any]:
    """Metrics over episodes (records of :class:`~swift_rlfactory.runs.eval_log.EvalLog`, failed ones included: docs/eval.md);
    ``samples`` is k of pass@k.
    """
    if not records:
        return {"questions": 0, "episodes": 0, "failed_episodes": 0}
    scored = [r for r in records if has_reference(r)]  # the one place it is decided, per record
    by_question: dict[int, list[float]] = defaultdict(list)
    for record in scored:
        by_question[record["index"]].append(_score(record, "em"))
    finished = [r for r in records if not is_failed(r)]
    calls = sum(r["metrics"]["tool_calls"] for r in finished)
    errors = sum(r["metrics"]["tool_errors"] for r in finished)

    def over_scored(values: list[float]) -> float | None:
        return _mean(values) if scored else None

    metrics: dict[str, Any] = {
        "questions": len({r["index"] for r in records}),
        "questions_without_reference": len({r["index"] for r in records} - set(by_question)),
        "episodes": len(records),
        "failed_episodes": len(records) - len(finished),
        "samples": samples,
        "em": over_scored([_score(r, "em") for r in scored]),
        "f1": over_scored([_score(r, "f1") for r in scored]),
        # a failed record has no rewards: 0 in every component, as in every score
        "reward": _mean([r.get("rewards", {}).get("total", 0.0) for r in records]),
        "tool_calls": calls / len(finished) if finished else 0.0,
        "tool_error_rate": errors / calls if calls else None,
        f"pass@{samples}": over_scored([float(any(em == 1.0 for em in ems)) for ems in by_question.values()]),
    }
    if samples > 1:
        metrics["pass@1"] = over_scored([_mean(ems) for ems in by_question.values()])
    names = sorted({name for r in finished for name in r["rewards"] if name != "total"})
    for name in names:
        metrics[f"reward/{name}"] = _mean([r.get("rewards", {}).get(name, 0.0) for r in records])
    trajectories = [trajectory_from_record(r) for r in finished]
    metrics.update({k: v for k, v in tool_metrics(trajectories).items() if k not in _HEADLINE_DUPLICATES})
    return metrics


def summarize_groups(
    records: Sequence[dict[str, Any]], rows: Mapping[int, dict[str, Any]], column: str, samples: int
) -> dict[str, dict[str, Any]]:
    """Headline metrics of the episodes of each value of dataset column ``column`` (``"None"`` if absent);
    ``rows`` by position, the ``index`` of each record (:func:`~.runner.load_dataset`)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        groups[str(rows[record["index"]].get(column))].append(record)
    keep = {"questions", "episodes", "em", "f1", "reward", "tool_calls", f"pass@{samples}"}
    return {
        value: {k: v for k, v in summarize(group, samples).items() if k in keep}
        for value, group in sorted(groups.items())
    }


def groups_table(groups: dict[str, dict[str, Any]], column: str) -> Table:
    """One row per group value: questions, EM, F1, reward, tool calls."""
    table = Table(title=f"by {column}", show_header=True, header_style="bold")
    for name in (column, "questions", "EM", "F1", "reward", "tool calls / episode"):
        table.add_column(name, justify="left" if name == column else "right")
    for value, m in groups.items():
        table.add_row(
            value, str(m["questions"]), _format(m["em"]), _format(m["f1"]), _format(m["reward"]),
            _format(m["tool_calls"]),
        )  # fmt: skip
    return table


def metrics_rows(metrics: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """The metrics as ``(label, value, headline)`` rows, headline numbers first, values formatted (what
    :func:`metrics_table` prints and the web UI shows); nested values are not rows.
    """
    k = metrics.get("samples", 1)
    headline = [
        ("questions", "questions"),
        ("questions_without_reference", "questions without a reference answer (not in EM, F1, pass@k)"),
        ("skipped_rows", "dataset rows skipped at load (no question, no answer, not JSON)"),
        ("episodes", "episodes"),
        ("em", "EM"),
        ("f1", "F1"),
        ("reward", "reward (env total)"),
        ("tool_calls", "tool calls / episode"),
        ("tool_error_rate", "tool error rate"),
        (f"pass@{k}", f"pass@{k}"),
        ("pass@1", "pass@1 (mean EM over samples)"),
    ]
    # a count of 0 (every row has a reference, none skipped) is not news; pass@1 is listed once when k is 1
    shown = {key for key in ("questions_without_reference", "skipped_rows") if not metrics.get(key)}
    rows = []
    for key, label in headline:
        if key in metrics and key not in shown:
            rows.append((label, _format(metrics[key]), True))
            shown.add(key)
    shown |= {key for key, _ in headline}
    rows += [
        (key, _format(value), False)
        for key, value in metrics.items()
        if key not in shown and key != "samples" and not isinstance(value, dict | list)
    ]
    return rows


def metrics_table(metrics: dict[str, Any], title: str = "evaluation") -> Table:
    """The metrics as a two-column rich table, headline numbers first."""
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for label, value, headline in metrics_rows(metrics):
        table.add_row(label, value, style=None if headline else "dim")
    return table


def _format(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)
