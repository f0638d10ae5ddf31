"""Question-answering datasets converted to ms-swift rows.

Open-domain QA sets circulate in these shapes, all read here:

* FlashRAG JSONL (what Search-R1 downloads): ``{"id": "train_0", "question": "who got the first nobel
  prize in physics", "golden_answers": ["Wilhelm Conrad Röntgen"]}``, and its kin (TriviaQA, NQ, HotpotQA,
  MuSiQue, BoolQ: the answer columns of :data:`~swift_rlfactory.data.answers.REFERENCE_COLUMNS`);
* Search-R1 parquet (``nq_search.py`` output), which keeps those columns and adds ``prompt`` and
  ``reward_model: {"ground_truth": {"target": [...]}}``;
* SQuAD's ``.json`` (v1 and v2, whose unanswerable questions are left out), TriviaQA's (``{"Data": [...]}``)
  and JSON lists;
* DPR's ``.csv``/``.tsv`` (``question<TAB>['answer', ...]``) and other tables with a question column;
* retrieval sets that name the question ``query`` (BEIR, MS MARCO: ``{"_id": ..., "query": ...}``).

Each becomes the row our GRPO runs train on::

    {"messages": [{"role": "user", "content": "who got the first nobel prize in physics?"}],
     "golden_answers": ["Wilhelm Conrad Röntgen"], "solution": "Wilhelm Conrad Röntgen"}

``golden_answers`` feeds the ``em``/``f1`` rewards (best match over all answers); ``solution`` is the
first answer, for tools that expect a single reference. The question gets a trailing ``?`` when it ends
no sentence, as Search-R1 does, because NQ questions are lower-case fragments without one
(:func:`as_question`: a question mark of any script, ``？`` or ``؟``, is one, and so is a full stop).
The environment's system prompt is not baked in: it comes from ``env.yaml`` at training time.
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
    """One ms-swift row from a question and its accepted answers (the first is the ``solution``).

    ``None`` and NaN entries are dropped, not written as the answers 'None' and 'nan'; nested lists and
    ``{"text": ...}`` dicts are read as :func:`swift_rlfactory.data.answers.answers_of` says, and any other
    container is refused (``ValueError``), never written as its ``str()``."""
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
    """``text`` stripped, with a ``?`` after it unless it already ends a sentence.

    NQ's questions are lower-case fragments with no mark at all, which get one. A question mark of any
    script ends a sentence (every character Unicode names one: ``?``, the full-width ``？`` of Chinese and
    Japanese, the Arabic ``؟``, ``⁇`` ...; and ``‽``), as do a full stop and an exclamation mark (``.``,
    ``。``, ``！``): GSM8K-style problems end in an instruction, "... calculate the total number of insects
    in the plot.", which became "plot.?". A mark before closing quotes or brackets counts (``Who said
    "why?"``), so no question ends in two of them.

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

    The question is the record's ``question`` (TriviaQA: ``Question``; BEIR and MS MARCO: ``query``), the
    first of them it holds, so a ``query`` beside a ``question`` is not read; a record without one that has a
    ``prompt`` chat list (verl and Search-R1 parquet rows, whose question is inside the rendered prompt)
    keeps that list as its ``messages``. The answers are those :func:`_answers` finds.

    The record's other scalar columns (``id``, ``hops``, ``family``, ...: text, numbers, booleans) stay on
    the row, after the ones written here, which they never replace: ``id`` joins results back to the
    source and ``--group-by hops`` groups by them. Containers (``metadata``) and the question and answer
    columns themselves are not copied."""
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
    """Read ``.jsonl``, ``.json`` (a list), ``.csv``/``.tsv`` or ``.parquet`` QA records and convert every
    one (SQuAD v2's unanswerable questions are left out, said once: :func:`read_records`).

    Parquet needs pandas with pyarrow. A bad record raises ``ValueError`` naming the file and its line
    (``.jsonl``) or record (``.json``, ``.parquet``); so does a file that is not UTF-8 JSON
    (:func:`swift_rlfactory.data.jsonl.read_text`).
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
    """The records of a dataset file, each with where it is: ``"line N"`` of a ``.jsonl`` file (blank
    lines skipped) or a ``.csv``/``.tsv`` table, ``"record N"`` of a ``.json`` list or a ``.parquet``
    table, ``"data[i].paragraphs[j].qas[k]"`` of a SQuAD-style ``.json`` (``{"data": [{"paragraphs":
    [{"qas": [...]}]}]}``), whose records are its questions, and ``"Data[i]"`` of TriviaQA's own ``.json``
    (``{"Data": [...], "Domain": ...}``). A ``.json`` file holding JSON Lines (what Hugging Face
    ``datasets``' ``to_json`` writes) is read as JSON Lines, and a ``.jsonl`` file holding one JSON list
    as that list. A text file may be
    compressed by gzip, bzip2 or xz (``.jsonl.gz``, ``.json.bz2``, ``.tsv.xz``; a zstd file is refused,
    named: :func:`swift_rlfactory.data.jsonl.read_bytes`).

    Text files are UTF-8, with or without a byte order mark; ``ValueError`` names the file (and line) of
    one that is not, or is not JSON, or of a ``.json`` file that is neither a list nor SQuAD-style, or of
    a ``.parquet`` file pandas cannot read. ``OSError`` is the caller's to word.

    What no one can score is left out and said once, by :data:`logger` or into ``skipped`` as a
    :class:`SkippedRecord`: SQuAD v2's unanswerable questions (``"is_impossible": true``, no ``answers``; their
    ``plausible_answers`` are wrong on purpose). Given ``skipped``, so is a JSON Lines line that is not
    JSON (a line cut short, a stray log line) or a table row of the wrong number of cells, rather than
    stopping the whole file.

    Each record's :attr:`~DatasetRecord.position` is where it stands among all the file's records, the
    skipped ones included (a line that is not JSON is a record, a blank line is none): an eval keys its
    results by it, so fixing a bad line, or a record becoming unanswerable, moves no other record's
    results onto another question."""
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
    """The records of a JSON Lines file, or of one JSON list saved under that name (``json.dump(rows, f,
    indent=2)`` into ``dev.jsonl``), whose lines are no JSON each and would all be skipped as torn. A
    list whose first line is ``[`` alone (pretty-printed: no JSON Lines record is) that is not valid JSON
    raises ``ValueError`` saying where, as a ``.json`` file does."""
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
    """A parquet cell as JSON's own types: pandas hands back numpy arrays (of dicts of arrays) and numpy
    scalars, which a ``messages`` check refuses as no list and a log line writes as their ``str()``
    (``"['a' 'b']"``, an answer nothing matches when the line is scored again)."""
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


_TABLES = {".csv", ".tsv"}


def _table_records(path: Path, skipped: list[tuple[int, str]] | None) -> _Found:
    """The rows of a ``.csv``/``.tsv`` file as records, by the csv module (quoting as spreadsheets write it).

    DPR's QA files (``nq-test.qa.csv``, ``trivia-test.qa.csv``) are tab-separated whatever their name,
    without a header: ``question<TAB>['answer 1', 'answer 2']``, the answers a Python list's repr. So the
    delimiter is a tab when the first line holds one, else a comma; a first row naming a question column
    (``question``, ``Question``, ``query``) is the header, else the columns are DPR's ``question``,
    ``answers``. A cell holding a list's repr or JSON (``['a', 'b']``, ``["a"]``) is that list. A row with
    another number of cells than the header is skipped, said as its line number and why (or
    ``ValueError`` without ``skipped``)."""
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
    """verl's ``reward_model.ground_truth`` (Search-R1's ``{"target": [...]}``, or the answer itself, as
    verl's math sets keep it: ``"72"``), what verl scores such a row by, before any other column (a raw
    ``answer`` beside it may be the worked solution, ``"... #### 72"``); else the first answer column
    holding an answer, with its ``_aliases`` column (an empty one is read past, as the trajectory does).
    The columns and their order are :data:`~swift_rlfactory.data.answers.REFERENCE_COLUMNS`, the trajectory's
    own, so a record converted here and the same record kept as a ``messages`` row are scored against the
    same answers."""
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
