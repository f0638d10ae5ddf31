"""Question-answering datasets converted to ms-swift rows.

Open-domain QA sets circulate in two shapes, both read here:

* FlashRAG JSONL (what Search-R1 downloads): ``{"id": "train_0", "question": "who got the first nobel
  prize in physics", "golden_answers": ["Wilhelm Conrad Röntgen"]}``;
* Search-R1 parquet (``nq_search.py`` output), which keeps those columns and adds ``prompt`` and
  ``reward_model: {"ground_truth": {"target": [...]}}``.

Each becomes the row our GRPO runs train on::

    {"messages": [{"role": "user", "content": "who got the first nobel prize in physics?"}],
     "golden_answers": ["Wilhelm Conrad Röntgen"], "solution": "Wilhelm Conrad Röntgen"}

``golden_answers`` feeds the ``em``/``f1`` rewards (best match over all answers); ``solution`` is the
first answer, for tools that expect a single reference. The question gets a trailing ``?`` when it has
none, as Search-R1 does, because NQ questions are lower-case fragments without one. The environment's
system prompt is not baked in: it comes from ``env.yaml`` at training time.
"""

from __future__ import annotations

import json
import numbers
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import jsonl


def qa_row(question: str, answers: Iterable[str]) -> dict[str, Any]:
    """One ms-swift row from a question and its accepted answers (the first is the ``solution``).

    ``None`` and NaN entries are dropped, not written as the answers 'None' and 'nan'."""
    golden = [str(a).strip() for a in answers if not _missing(a) and str(a).strip()]
    if not golden:
        raise ValueError(f"question without an answer: {question!r}")
    question = question.strip()
    if not question.endswith("?"):
        question += "?"
    return {
        "messages": [{"role": "user", "content": question}],
        "golden_answers": golden,
        "solution": golden[0],
    }


def convert_qa_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A FlashRAG / Search-R1 record as an ms-swift row; ``ValueError`` when it has no question or answer."""
    question = record.get("question")
    if _missing(question) or not question:
        raise ValueError(f"record without a 'question': {dict(record)!r}")
    answers = _answers(record)
    return qa_row(str(question), [answers] if isinstance(answers, str) else answers)


def load_qa(path: str | Path) -> list[dict[str, Any]]:
    """Read ``.jsonl``, ``.json`` (a list) or ``.parquet`` QA records and convert every one.

    Parquet needs pandas with pyarrow. A bad record raises ``ValueError`` naming the file and row.
    """
    path = Path(path).expanduser()
    records = _read_records(path)
    rows = []
    for number, record in enumerate(records, start=1):
        try:
            rows.append(convert_qa_record(record))
        except ValueError as exc:
            raise ValueError(f"{path}: record {number}: {exc}") from None
    return rows


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: str | Path) -> None:
    """Write rows as UTF-8 JSONL, one row a line, keys in insertion order (so the files diff cleanly).

    Written to a temporary file beside ``path`` and moved into place, so a crash or an error halfway never
    leaves ``path`` half-written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    with partial.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(partial, path)


def _answers(record: Mapping[str, Any]) -> Any:
    for key in ("golden_answers", "answers", "answer", "solution"):
        if _given(record.get(key)):
            return _plain(record[key])
    target = ((record.get("reward_model") or {}).get("ground_truth") or {}).get("target")
    if _given(target):
        return _plain(target)
    raise ValueError("record without 'golden_answers'")


def _given(value: Any) -> bool:
    """An answer is there: a non-empty string, a list holding an answer, or a number (``2``, a GSM8K-style
    answer). A field that is missing, NaN or a list of only those is not given, so the next key is read."""
    if _missing(value) or isinstance(value, Mapping):
        return False
    if isinstance(value, str):
        return len(value) > 0
    return any(not _missing(a) for a in value) if hasattr(value, "__len__") else True


def _missing(value: Any) -> bool:
    """``None``, or NaN: how JSON's ``null`` arrives, and how pandas fills a parquet cell with no value."""
    return value is None or (isinstance(value, numbers.Number) and value != value)


def _plain(value: Any) -> Any:
    # Parquet hands back numpy arrays for list columns; a number is its text.
    value = value.tolist() if hasattr(value, "tolist") else value
    return value if isinstance(value, str | list) else str(value)


def _read_records(path: Path) -> list[Mapping[str, Any]]:
    if path.suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(path).to_dict(orient="records")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    return [json.loads(line) for line in jsonl.lines(text) if line.strip()]
