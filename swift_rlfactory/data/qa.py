"""Question-answering datasets converted to ms-swift rows.

Reads FlashRAG, Search-R1, verl, SQuAD, TriviaQA, DPR and BEIR-style files (JSONL, JSON, CSV/TSV,
parquet, compressed or not) into ``{"messages", "golden_answers", "solution", ...}`` rows; the formats
and the conversion rules are in docs/data.md ("QA files").
"""

from __future__ import annotations

import ast
import csv
import io
import json
import logging
import os
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from swift_rlfactory.data import jsonl
from swift_rlfactory.data.answers import ALIASES, REFERENCE_COLUMNS, answers_of, first_answers, missing

logger = logging.getLogger(__name__)


def qa_row(question: str, answers: Iterable[str]) -> dict[str, Any]:
    """One ms-swift row from a question and its accepted answers (the first is the ``solution``); ``None``
    and NaN answers are dropped, an unreadable container refused (``ValueError``).
    """
    golden = answers_of(list(answers), strict=True)
    if not golden:
        raise ValueError(f"question without an answer: {question!r}")
    question = as_question(question)
    return {
        "messages": [{"role": "user", "content": question}],
        "golden_answers": golden,
        "solution": golden[0],
    }


def as_question(text: str) -> str:
    """``text`` stripped, with a ``?`` after it unless it already ends a sentence (docs/data.md).

    >>> as_question("who got the first nobel prize in physics")
    'who got the first nobel prize in physics?'
    >>> as_question("法国的首都是哪里？")
    '法国的首都是哪里？'
    >>> as_question("If there were 188 beetles, calculate the total number of insects.")
    'If there were 188 beetles, calculate the total number of insects.'
    """
    text = text.strip()
    last = text.rstrip("\"'”’»›」』）)]】〉》").rstrip()[-1:]
    name = unicodedata.name(last, "") if last else ""
    if any(mark in name for mark in _SENTENCE_ENDS) or last == "\u203d":  # ‽ INTERROBANG
        return text
    return text + "?"


# What Unicode names the marks that end a sentence: ? ？ ؟ ⁇, . 。 ．, ! ！ ‼
_SENTENCE_ENDS = ("QUESTION MARK", "FULL STOP", "EXCLAMATION MARK")


def convert_qa_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A QA record as an ms-swift row; ``ValueError`` when it has no question or no answer.

    Which column is the question, which the answers, and which other columns stay: docs/data.md
    ("From record to row").
    """
    if not isinstance(record, Mapping):
        raise ValueError(f"a record is a JSON object, got {type(record).__name__}")
    key = next((k for k in _QUESTION_KEYS if k in record), _QUESTION_KEYS[0])
    question = record.get(key)
    prompt = _prompt(record) if key not in record else None
    if prompt is not None:
        golden = _answers(record)
        row: dict[str, Any] = {"messages": prompt, "golden_answers": golden, "solution": golden[0]}
    elif (
        not isinstance(question, str | int | float)
        or isinstance(question, bool)  # a column of flags, never a question ("True?")
        or missing(question)
        or not str(question).strip()
    ):
        raise ValueError(
            f"no question: {key!r} is missing, empty or not text (nor is there a 'prompt' chat list) "
            f"in {dict(record)!r:.200}"
        )
    else:
        row = qa_row(str(question), _answers(record))
    for key, value in record.items():
        value = value.tolist() if hasattr(value, "tolist") else value  # a numpy scalar from parquet
        scalar = isinstance(value, str | int | float | bool) and not missing(value)
        if scalar and key not in row and key not in _READ:
            row[key] = value
    return row


def load_qa(path: str | Path) -> list[dict[str, Any]]:
    """Read a QA file (``.jsonl``, ``.json``, ``.csv``/``.tsv``, ``.parquet``) and convert every record;
    ``ValueError`` names the file and the line or record of a bad one.
    """
    path = Path(path).expanduser()
    rows = []
    for record in read_records(path):
        try:
            rows.append(convert_qa_record(record.value))
        except ValueError as exc:
            raise ValueError(f"{path}: {record.where}: {exc}") from None
    return rows


class DatasetRecord(NamedTuple):
    """One record of a dataset file, with where it is (for messages) and its position (for results)."""

    position: int  # from 0, among all the file's records: the skipped ones count, blank lines do not
    where: str  # "line 3", "record 2", "data[0].paragraphs[1].qas[4]"
    value: Any  # the record as the file holds it, usually a dict


class SkippedRecord(NamedTuple):
    """A record of a dataset file that no one can score: where it is, why, and the position it keeps."""

    where: str  # as DatasetRecord.where
    why: str
    position: int  # as DatasetRecord.position: a merge of files (eval_sets.py) keeps the record's place


def read_records(path: Path, skipped: list[SkippedRecord] | None = None) -> list[DatasetRecord]:
    """The records of a dataset file, each with where it is (``"line N"``, ``"record N"``,
    ``"data[i].paragraphs[j].qas[k]"``, ``"Data[i]"``) and its position among all the file's records.

    Unscorable records (SQuAD v2's unanswerable ones) are left out and said once; given ``skipped``, so are
    lines that are not JSON and table rows of the wrong width. The rules: docs/data.md ("File formats").
    """
    suffix = jsonl.format_suffix(path)
    bad: list[tuple[int, str]] = []  # (line number, why): lines skipped as no record at all
    lines = None if skipped is None else bad  # without `skipped`, such a line raises ValueError
    if suffix == ".parquet":
        found = _parquet_records(path)
    elif suffix in _TABLES:
        found = _table_records(path, lines)
    elif suffix != ".json":
        found = _json_lines_records(path, lines)
    else:
        found = _json_records(path, lines)
    order = sorted({key for key, _, _ in found} | {n for n, _ in bad})
    position = {key: i for i, key in enumerate(order)}
    if skipped is not None:
        skipped += [SkippedRecord(f"line {n}", why, position[n]) for n, why in bad]
    kept, unanswerable = [], []
    for key, where, value in found:
        record = DatasetRecord(position[key], where, value)
        (unanswerable if _impossible(value) else kept).append(record)
    if unanswerable:
        why = "unanswerable (SQuAD v2's 'is_impossible': nothing to match)"
        if skipped is None:
            places = ", ".join(r.where for r in unanswerable[:3]) + (", ..." if len(unanswerable) > 3 else "")
            logger.warning(
                "%s: left out %d %s questions (%s); nothing to do for SQuAD v2, where that is on purpose. "
                "To keep one, give it 'answers' and set 'is_impossible': false",
                path, len(unanswerable), why, places,
            )  # fmt: skip
        else:
            skipped += [SkippedRecord(record.where, why, record.position) for record in unanswerable]
    return kept


# What each reader below finds: (its order in the file, where it is as said to the user, the record). The
# order is a line number for line-based files, a count for the others; read_records ranks them.
_Found = list[tuple[int, str, Any]]


def _json_lines_records(path: Path, lines: list[tuple[int, str]] | None) -> _Found:
    """The records of a JSON Lines file, or of one JSON list saved under that name (docs/data.md)."""
    text = jsonl.read_text(path)
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:  # else a line of JSON Lines that is a list, and lines after it
            if text.lstrip().split("\n", 1)[0].strip() == "[":
                raise ValueError(
                    f"{path}: a JSON list (its first line is '['), but not valid JSON ({exc.msg}, line "
                    f"{exc.lineno}, column {exc.colno}): cut short?"
                ) from None
            data = None
        if isinstance(data, list):
            return [(n, f"record {n}", record) for n, record in enumerate(data, start=1)]
    return [(n, f"line {n}", record) for n, record in jsonl.parse_lines(text, path, lines)]


def _json_records(path: Path, lines: list[tuple[int, str]] | None) -> _Found:
    """The records of a ``.json`` file: a list, SQuAD's ``{"data": [...]}``, TriviaQA's ``{"Data":
    [...]}``, or JSON Lines so named."""
    text = jsonl.read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # one value after another: JSON Lines named .json (datasets' to_json)
            return [(n, f"line {n}", record) for n, record in jsonl.parse_lines(text, path, lines)]
        raise ValueError(
            f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}, column {exc.colno})"
        ) from None
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        return _squad_questions(data["data"], path)
    if isinstance(data, dict) and isinstance(data.get("Data"), list):  # TriviaQA's own qa/*.json
        return [(n, f"Data[{n}]", record) for n, record in enumerate(data["Data"])]
    if not isinstance(data, list):
        raise ValueError(
            f'{path}: a .json dataset is a list of records or SQuAD\'s {{"data": [...]}}, got '
            f"{type(data).__name__}" + (f" with keys {sorted(data)[:8]}" if isinstance(data, dict) else "")
        )
    return [(n, f"record {n}", record) for n, record in enumerate(data, start=1)]


def _impossible(record: Any) -> bool:
    """A SQuAD v2 question marked unanswerable that holds no answer to score against."""
    return (
        isinstance(record, Mapping)
        and record.get("is_impossible") is True
        and not answers_of(record.get("answers"))
    )


def _parquet_records(path: Path) -> _Found:
    """The rows of a ``.parquet`` table (verl, Search-R1), as records; ``ValueError`` naming the file
    when pandas with pyarrow is not installed or cannot read it."""
    data = io.BytesIO(jsonl.read_bytes(path))  # a .parquet.gz too, and a zstd one refused by name
    try:
        import pandas as pd

        table = pd.read_parquet(data).to_dict(orient="records")
    except ImportError as exc:
        raise ValueError(f"{path}: reading parquet needs pandas and pyarrow ({exc})") from None
    except OSError:
        raise
    except Exception as exc:  # pyarrow's ArrowInvalid and kin: not a parquet file, or a broken one
        raise ValueError(f"{path}: not a readable parquet file ({type(exc).__name__}: {exc})") from None
    return [(n, f"record {n}", _plain(record)) for n, record in enumerate(table, start=1)]


def _plain(value: Any) -> Any:
    """A parquet cell as JSON's own types (numpy arrays and scalars would be written as their ``str()``)."""
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


_TABLES = {".csv", ".tsv"}


def _table_records(path: Path, skipped: list[tuple[int, str]] | None) -> _Found:
    """The rows of a ``.csv``/``.tsv`` file as records, by the csv module; DPR's headerless tab-separated
    files included (the delimiter and header rules: docs/data.md).
    """
    text = jsonl.read_text(path)
    first = text.split("\n", 1)[0]
    table = list(csv.reader(io.StringIO(text), delimiter="\t" if "\t" in first else ","))
    header = [c.strip().removeprefix("\ufeff") for c in table[0]] if table else []
    start = 2
    if not set(_QUESTION_KEYS) & set(header):
        header, start = ["question", "answers"], 1
    found = []
    for number, cells in enumerate(table[start - 1 :], start=start):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            why = f"{len(cells)} cells, but the columns are {header}"
            if skipped is None:
                raise ValueError(f"{path}: line {number}: {why}")
            skipped.append((number, why))
            continue
        found.append((number, f"line {number}", {k: _cell(v) for k, v in zip(header, cells, strict=True)}))
    return found


def _cell(text: str) -> Any:
    """A table cell: the list it spells when it is a Python or JSON list (DPR's answers), else its text."""
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        try:
            value = ast.literal_eval(stripped)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            try:
                value = json.loads(stripped)
            except json.JSONDecodeError:
                return text
        if isinstance(value, list):
            return value
    return text


def _squad_questions(articles: list[Any], path: Path) -> _Found:
    """The ``qas`` entries of SQuAD's ``data[].paragraphs[].qas[]``, each with where it is."""
    found = []
    for i, article in enumerate(articles):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise ValueError(f"{path}: data[{i}]: no 'paragraphs' list (a SQuAD-style file has one in each)")
        for j, paragraph in enumerate(paragraphs):
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                raise ValueError(f"{path}: data[{i}].paragraphs[{j}]: no 'qas' list")
            for k, qa in enumerate(qas):
                found.append((len(found), f"data[{i}].paragraphs[{j}].qas[{k}]", qa))
    return found


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: str | Path) -> None:
    """Write rows as UTF-8 JSONL, one row a line, keys in insertion order; via a temporary file moved into
    place, so ``path`` is never left half-written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    with partial.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(partial, path)


# FlashRAG, NQ, HotpotQA, MuSiQue, SQuAD ...; TriviaQA; retrieval sets (BEIR, MS MARCO), in that order
_QUESTION_KEYS = ("question", "Question", "query")
_GROUND_TRUTH = "reward_model.ground_truth"
_READ = {  # what the converter reads: not copied as extras
    *_QUESTION_KEYS,
    "prompt",
    "reward_model",
    *REFERENCE_COLUMNS,
    *(k + ALIASES for k in REFERENCE_COLUMNS),
}


def _prompt(record: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """A record's ``prompt`` when it is a chat list holding a user message with text (verl's model input),
    else ``None``."""
    prompt = record.get("prompt")
    prompt = prompt.tolist() if hasattr(prompt, "tolist") else prompt  # a numpy array from parquet
    if not isinstance(prompt, list) or not all(isinstance(m, Mapping) for m in prompt):
        return None
    users = [m for m in prompt if m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    return [dict(m) for m in prompt] if isinstance(content, str) and content.strip() else None


def _answers(record: Mapping[str, Any]) -> list[str]:
    """verl's ``reward_model.ground_truth`` first, else the first answer column holding an answer, with its
    ``_aliases`` column: the trajectory's own rule (docs/data.md, "From record to row").
    """
    truth = record.get("reward_model")
    truth = truth.get("ground_truth") if isinstance(truth, Mapping) else None
    if isinstance(truth, Mapping) and "target" in truth:
        truth = truth["target"]
    columns = {**record, _GROUND_TRUTH: truth}
    answers = first_answers(columns, (_GROUND_TRUTH, *REFERENCE_COLUMNS), strict=True)
    if not answers:
        names = ", ".join(repr(k) for k in (*REFERENCE_COLUMNS, _GROUND_TRUTH))
        raise ValueError(f"no answer: none of {names} holds one (an empty list, or a question without one)")
    return answers
