"""Reference answers: how a dataset row's answer columns become the list of answers a reward accepts.

The one rule both ``Trajectory.golden_answers`` and the QA converter (:mod:`swift_rlfactory.data.qa`)
use; the columns, their order and every answer shape read: docs/data.md ("Reference answers").
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

_DICT_FIELDS = ("text", "answer")
# TriviaQA's answer, as its own release (Answer) and the Hugging Face copy (answer) spell it: each is accepted
_ALIAS_FIELDS = ("Value", "Aliases", "NormalizedAliases", "value", "aliases", "normalized_aliases")
_BOOLEAN = {True: ("yes", "true"), False: ("no", "false")}
ALIASES = "_aliases"
"""The suffix of a column holding more accepted answers for the column it is named after (``answer_aliases``)."""
REFERENCE_COLUMNS = ("golden_answers", "answers", "answer", "solution", "Answer")
"""The columns a row's reference answers are read from, first one holding any wins
(:func:`reference_answers`), for a row of ours and a QA record alike. ``answer`` comes before ``solution``:
where a public set has both (MATH, AIME and NuminaMath-style rows), ``solution`` is the worked solution
and ``answer`` the final one that exact match can meet."""


def answers_of(value: Any, *, strict: bool = False) -> list[str]:
    """The answers in one column's ``value``, stripped, in order, flattened; ``[]`` when there is none.

    ``strict``: raise ``ValueError`` naming an entry of no answer shape (what a loader does); without it
    such an entry is skipped (what a reward does). A JSON list of strings in text is that list.
    """
    return list(_walk(_json_list(value), strict))


def _json_list(value: Any) -> Any:
    """``value`` decoded when it is the JSON text of a list of strings, else ``value`` itself."""
    if not (isinstance(value, str) and value.strip().startswith("[")):
        return value
    try:
        decoded = json.loads(value)
    except (json.JSONDecodeError, RecursionError):
        return value
    is_texts = isinstance(decoded, list) and all(isinstance(entry, str) for entry in decoded)
    return decoded if is_texts else value


def first_answers(row: Mapping[str, Any], keys: Iterable[str], *, strict: bool = False) -> list[str]:
    """The answers of the first of ``keys`` whose column holds any (see :func:`answers_of`), followed by
    those of its aliases column (``answer`` -> ``answer_aliases``, :data:`ALIASES`); with ``strict``, the
    ``ValueError`` names the column."""
    for key in keys:
        answers = _column(row, key, strict)
        if answers:
            return answers + _column(row, key + ALIASES, strict)
    return []


def _column(row: Mapping[str, Any], key: str, strict: bool) -> list[str]:
    try:
        return answers_of(row.get(key), strict=strict)
    except ValueError as exc:
        raise ValueError(f"column {key!r}: {exc}") from None


def reference_answers(row: Mapping[str, Any]) -> list[str]:
    """A dataset row's reference answers: those of the first of :data:`REFERENCE_COLUMNS` holding any, what
    :attr:`swift_rlfactory.trajectory.Trajectory.golden_answers` and so ``em``/``f1`` score against."""
    return first_answers(row, REFERENCE_COLUMNS)


def missing(value: Any) -> bool:
    """``None``, or NaN: how JSON's ``null`` arrives, and how pandas fills a parquet cell with no value."""
    return value is None or (isinstance(value, numbers.Number) and value != value)


def _walk(value: Any, strict: bool) -> Iterable[str]:
    if hasattr(value, "tolist") and not isinstance(value, str):  # numpy array or scalar
        value = value.tolist()
    if missing(value):
        return
    if isinstance(value, str):
        if value.strip():
            yield value.strip()
    elif isinstance(value, bool):  # before Number: True is an int
        yield from _BOOLEAN[value]
    elif isinstance(value, numbers.Number):
        yield str(value)
    elif isinstance(value, list | tuple):
        for entry in value:
            yield from _walk(entry, strict)
    elif isinstance(value, Mapping) and any(k in value for k in _DICT_FIELDS):
        yield from _walk(next(value[k] for k in _DICT_FIELDS if k in value), strict)
    elif isinstance(value, Mapping) and any(k in value for k in _ALIAS_FIELDS):
        for key in _ALIAS_FIELDS:
            yield from _walk(value.get(key), strict)
    elif strict:
        raise ValueError(
            "an answer is text, a number, a list of them, a dict with a 'text' or 'answer' field or "
            f"TriviaQA's {{'Value', 'Aliases'}}; "
            f"got {type(value).__name__} {value!r:.200}"
        )
