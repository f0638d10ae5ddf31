"""Merge evaluation files into one dataset whose ``split`` column names the file each row came from.

    python examples/deepsearch/eval_sets.py OUT.jsonl [NAME=]FILE [[NAME=]FILE ...]

One eval run (one engine start-up) then scores them all, and ``--group-by split`` reports each file on its
own line. A file is a dataset of our rows (``messages`` + ``golden_answers``) or FlashRAG records
(``{"question": ..., "golden_answers": [...]}``, converted by ``swift_rlfactory.eval.runner.load_dataset``),
``.jsonl``, ``.json`` or ``.parquet``, or any common QA format ``load_dataset`` reads (NQ, TriviaQA,
HotpotQA, MuSiQue, SQuAD, verl; ``.gz``, ``.bz2`` and ``.xz`` too). NAME defaults to the file's stem (``my_questions.jsonl`` ->
``my_questions``); ``NAME=`` is read as a name only when NAME has no ``/`` and the whole argument is not
itself an existing file (``runs/x=1/eq.jsonl`` is a path). The first file is our own dataset: a row of it
that already has a ``split`` (an earlier merge) keeps it. Every later file is named by its NAME, whatever
split its rows carry (a third party's ``"split": "test"`` is not our test split), and a NAME that is
already a split of the first file is refused: that file was merged before, and merging it again would
count its questions twice. This is what ``EXTRA_EVAL=a.jsonl,b.jsonl`` does in ``eval.sh`` and in
``benchmarks/deepsearch/h200.sh``'s ``prepare`` phase.

A row no one can score (a torn line, no question) is said, and carried through as a row that holds its
place (:func:`swift_rlfactory.eval.runner.skipped_row`): the eval skips it naming the file and line it came
from, and every row after it keeps its position in the merged file, which the eval keys its results by. So
fixing the row and merging again, then resuming the eval, runs that row alone.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

from swift_rlfactory.data import jsonl
from swift_rlfactory.data.qa import SkippedRecord, read_records, write_jsonl
from swift_rlfactory.eval.runner import SKIPPED_ROW, load_dataset, skipped_row


def named(source: str) -> tuple[str, str]:
    """``[NAME=]FILE`` -> (NAME, FILE), spaces trimmed; NAME is the file's stem unless given, without a
    compression suffix (``nq_dev.jsonl.gz`` -> ``nq_dev``)."""
    source = source.strip()
    name, sep, path = source.partition("=")
    if sep and name and "/" not in name and (Path(path).exists() or not Path(source).exists()):
        return name.strip(), path.strip()
    return jsonl.without_compression(Path(source).name).stem, source


def file_rows(path: str) -> list[dict[str, Any]]:
    """Every record of a file in its order: its row, or for a row no one can score a :func:`skipped_row`
    naming the file, where and why (one that already holds a skipped row's place, from an earlier
    merge, is kept as it is)."""
    skipped: list[SkippedRecord] = []
    found = load_dataset(path, skipped=skipped)  # says what it skipped; ValueError when nothing is left
    if not skipped:
        return list(found.values())
    raw = {record.position: record.value for record in read_records(Path(path).expanduser(), [])}
    carried = {
        s.position: raw[s.position]
        if isinstance(raw.get(s.position), dict) and SKIPPED_ROW in raw[s.position]
        else skipped_row(f"{path}: {s.where}: {s.why}")
        for s in skipped
    }
    return [found[i] if i in found else carried[i] for i in range(len(found) + len(carried))]


def tagged_rows(sources: list[str]) -> list[dict[str, Any]]:
    """The rows of every ``[NAME=]FILE``, each with ``split`` set (the first file's own, else NAME).

    Raises:
        ValueError: two files would get the same name, a later file's name is already a split of the
            first file (merged twice), or a file cannot be read or has no row that can be scored.
    """
    files = [named(s) for s in sources if s.strip()]
    twice = [name for name, n in Counter(name for name, _ in files).items() if n > 1]
    if twice:
        raise ValueError(f"two evaluation files are both named {twice[0]!r}: give one NAME=FILE")
    rows: list[dict[str, Any]] = []
    ours: set[str] = set()  # the splits of the first file (ours; an earlier merge has several)
    for index, (name, path) in enumerate(files):
        found = file_rows(path)
        if index == 0:
            rows += [{**row, "split": row.get("split") or name} for row in found]
            ours = {row["split"] for row in rows}
            continue
        if name in ours:
            raise ValueError(
                f"{path}: {files[0][1]} already has a split named {name!r} (an earlier merge?): "
                "its questions would count twice; give each extra file once, or NAME=FILE"
            )
        own = sorted({str(row["split"]) for row in found if row.get("split") not in (None, "", name)})
        if own:  # said, not done silently: a file with dev and test rows may want NAME=FILE per part
            print(
                f"eval_sets.py: {path}: its rows' own split ({', '.join(own)}) is replaced by {name!r}, "
                "the file's name",
                file=sys.stderr,
            )
        rows += [{**row, "split": name} for row in found]
    return rows


def main(argv: list[str] | None = None) -> None:
    """Write the merged file and say how many rows each split has."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        raise SystemExit(__doc__)
    try:
        rows = tagged_rows(argv[1:])
    except ValueError as exc:
        raise SystemExit(f"eval_sets.py: {exc}") from None
    write_jsonl(rows, argv[0])
    counts = Counter(row["split"] for row in rows if SKIPPED_ROW not in row)
    skipped = Counter(row["split"] for row in rows if SKIPPED_ROW in row)
    said = [
        f"{name} {counts[name]}" + (f" ({skipped[name]} skipped)" if skipped[name] else "")
        for name in counts | skipped
    ]
    print(f"{argv[0]}: " + ", ".join(said))


if __name__ == "__main__":
    main()
