"""Reference answers: how a dataset row's answer columns become the list of answers a reward accepts.

Two readers use this one rule: :attr:`swift_rlfactory.trajectory.Trajectory.golden_answers` (what the
``em``/``f1`` rewards and the judge read, in training and in eval) and the FlashRAG / Search-R1 converter
in :mod:`swift_rlfactory.data.qa`. Answer sets come in many shapes; all of these are read:

* one value or a list: ``"Paris"``, ``["Paris", "City of Light"]``; a number is its text (``2`` is ``"2"``);
* a boolean (BoolQ's ``"answer": true``, StrategyQA's) is the answers ``"yes"`` and ``"true"`` (``false``:
  ``"no"``, ``"false"``): a model answers a yes/no question in words, as HotpotQA's yes/no answers are
  written, and EM lower-cases, so ``True`` (its ``str()``) matched only a model that wrote "true";
* nested lists, flattened at any depth: ``[["Paris", "City of Light"]]``;
* SQuAD-style dicts, by their ``text`` (else ``answer``) field: ``[{"text": "x", "answer_start": 3}]``,
  ``{"text": ["x", "y"], "answer_start": [3, 9]}``;
* TriviaQA's answer dict, by its value and every alias: ``{"Value": "Mars", "Aliases": ["The Red Planet"],
  "NormalizedAliases": ["mars", "red planet"]}`` (the official scorer matches the normalised aliases), or
  as the Hugging Face copy spells it, ``{"value": ..., "aliases": [...], "normalized_aliases": [...]}``;
* aliases kept in a column of their own, named after the answer column with ``_aliases`` (MuSiQue's
  ``answer`` + ``answer_aliases``): :func:`first_answers` adds them to the column they belong to;
* numpy arrays and scalars (how pandas hands back a parquet cell), through ``tolist()``;
* a column holding the JSON text of a list of strings, as a table exported to JSON Lines writes one:
  ``'["Paris", "paris, france"]'`` is those two answers (:func:`answers_of`). Other text that
  starts with ``[`` is the answer it spells: ``"[citation needed]"``, and ``"[-2, 7]"``, an interval.

``None``, NaN, empty and all-blank strings are no answer, and a column holding no answer is as good as
absent: the next column is read. A container is never turned into an answer's text (``str()`` of a list
is an answer nothing matches, so the episode silently scored 0); one this cannot read is refused by
:func:`answers_of` with ``strict=True`` and skipped otherwise.
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

    ``strict``: raise ``ValueError`` naming an entry that is neither text, a number, a list nor a dict
    with a ``text``/``answer`` field (what a loader does, to refuse the row); without it such an entry
    is skipped (what a reward does, so one odd row never crashes a batch).

    A ``value`` that is the JSON text of a list of strings is that list (``'["Paris"]'``, and ``'[]'``,
    no answer); an entry of a list is always its own text. A JSON list holding a number stays text,
    because MATH writes an interval answer so: ``"[-2, 7]"`` is one answer, not -2 and 7."""
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
