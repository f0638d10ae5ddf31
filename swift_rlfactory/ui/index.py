"""A byte-offset index over ``trajectories.jsonl``, so the viewer never holds the whole log in memory.

What it keeps per line, how eval retries and resumed runs count, and what is skipped: docs/ui.md
("The trajectory index").
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swift_rlfactory.runs.eval_log import episode_key, is_failed
from swift_rlfactory.runs.resume import StepLines, trajectory_step

from .tail import ChainTail, json_object

FAILED = "failed"  # the stop reason shown for an eval episode that failed on every attempt
GROUPS = 100  # groups the dropdown offers at once (:meth:`TrajectoryIndex.group_choices`)
ERROR_CHARS = 200  # of an episode's error kept in the index (the table shows the start; the viewer all)


@dataclass(frozen=True)
class Entry:
    """What the index keeps about one trajectory line."""

    number: int
    offset: int
    step: int | None
    group: str
    prompt: str
    reward: float | None
    stop_reason: str
    tool_calls: int
    tool_errors: int
    turns: int
    error: str = ""  # the episode's error (a failed eval episode, a training stop reason ``error``), cut
    episode: tuple[int, int] | None = None  # an eval line's (index, sample); a training line has none
    earlier: tuple[int, ...] = ()  # numbers of the earlier lines of the same eval episode, oldest first
    log: int = 0  # which log of the run's chain holds the line (0: the oldest; one log: that one)


@dataclass(frozen=True, slots=True)
class Line:
    """What the index knows of a training line it has not parsed yet (:func:`scan`): enough for the
    resume rule, the steps and the stop reasons; the line is parsed into its :class:`Entry` when a page
    needs more of it."""

    number: int
    offset: int
    step: int
    stop_reason: str
    log: int = 0
    episode: None = None  # a line read by a scan is a training line, never an eval episode


@dataclass(frozen=True, slots=True)
class Scanned:
    """The fields :func:`scan` read from a line's bytes."""

    step: int
    stop_reason: str


# a line as TrajectoryLog writes it starts with these two keys: "step" is then a key of the top object
HEAD = re.compile(rb'\{"step": (\d+), "time": ')
# the stop reason's key with its value when that is null or a plain string (else no value), the keys that
# make a line an eval episode or a failed one (at any depth), and a second step (another line's: a torn
# line that a resumed writer appended to); one literal prefix keeps the search fast
KEYS = re.compile(rb'"(stop_reason|index|sample|failed|step)": (null[,}]|"[^"\\]*"[,}])?')


def scan(line: bytes) -> Scanned | dict[str, Any] | None:
    """A training line's step and stop reason read from its bytes, without parsing the line, where that is
    sure to read what :func:`summarize` would; any other line parsed whole (``None``: no JSON object).

    Sure means: the line starts as :class:`~swift_rlfactory.runs.log.TrajectoryLog` writes one (so the
    step is the top object's), names ``"stop_reason"`` once (a writer that always writes it top-level
    names no other) with a plain string or ``null``, names no eval key (``index``, ``sample``, ``failed``),
    and names no second ``step`` (a torn line a resumed writer appended to is no JSON: it is skipped).
    A quote inside a JSON string is escaped, so ``"key": `` in the bytes is always a key.
    """
    head = HEAD.match(line)
    if head is None or not line.endswith(b"}\n"):
        return json_object(line)
    keys = KEYS.findall(line, head.end())
    if len(keys) != 1 or keys[0][0] != b"stop_reason" or not keys[0][1]:
        return json_object(line)
    value = keys[0][1]
    try:
        return Scanned(int(head[1]), "" if value[0] == 110 else value[1:-2].decode())  # 110: the n of null
    except UnicodeDecodeError:
        return None


class Entries(Sequence[Entry]):
    """The index's lines, each parsed into its :class:`Entry` the first time it is asked for."""

    def __init__(self, index: TrajectoryIndex):
        self._index = index
        self.lines: list[Entry | Line] = []

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, number: int) -> Entry:  # type: ignore[override]
        line = self.lines[number]
        if isinstance(line, Line):
            line = self.lines[number] = self._index.parse(line)
        return line

    def __iter__(self) -> Iterator[Entry]:
        return (self[n] for n in range(len(self.lines)))


@dataclass(frozen=True)
class Filters:
    """Which trajectories to show; ``None`` or empty means no constraint."""

    step: int | None = None
    group: str | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    stop_reason: str | None = None
    tool_errors_only: bool = False
    text: str = ""


def items(record: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """``record[key]`` as a list of objects (``messages``, ``tool_calls``): anything else there is none."""
    value = record.get(key)
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def as_number(value: Any) -> float | None:
    """A logged number (not a bool), else ``None``."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def prompt_of(record: dict[str, Any]) -> str:
    """The question a trajectory answers: the eval ``question`` field, else the last user message."""
    if isinstance(record.get("question"), str):
        return record["question"]
    users = [
        m["content"]
        for m in items(record, "messages")
        if m.get("role") == "user" and isinstance(m.get("content"), str)
    ]
    return users[-1] if users else ""


def error_of(record: dict[str, Any]) -> str:
    """The episode's own error (not its tool calls'): a failed eval episode's, or a training error's."""
    error = record.get("error")
    if error in (None, ""):
        return ""
    return error if isinstance(error, str) else json.dumps(error, ensure_ascii=False, default=str)


def eval_episode(record: dict[str, Any]) -> tuple[int, int] | None:
    """An eval line's ``(index, sample)``; ``None`` for a training line (or an eval line without them)."""
    try:
        return episode_key(record)
    except (KeyError, ValueError, TypeError):
        return None


def summarize(
    number: int, offset: int, record: dict[str, Any], earlier: tuple[int, ...] = (), log: int = 0
) -> Entry:
    """The index entry of one parsed line; ``earlier`` are the lines of the same eval episode before it,
    ``log`` the log of the run's chain that holds it."""
    calls = items(record, "tool_calls")
    prompt = prompt_of(record)
    # an eval output's group is one question; a training step's is one prompt
    group = f"q{record['index']}" if "index" in record else hashlib.sha1(prompt.encode()).hexdigest()[:8]
    rewards = record.get("rewards")
    total = as_number(rewards.get("total")) if isinstance(rewards, dict) else None
    if total is None:
        total = as_number(record.get("reward"))
    turns = record.get("turns")
    stop = record.get("stop_reason")
    return Entry(
        number=number,
        offset=offset,
        step=trajectory_step(record),
        group=group,
        prompt=prompt,
        reward=total,
        stop_reason=FAILED if is_failed(record) else str(stop) if stop else "",
        tool_calls=len(calls),
        tool_errors=sum(1 for c in calls if c.get("error")),
        turns=turns if isinstance(turns, int) and not isinstance(turns, bool) else 0,
        error=error_of(record)[:ERROR_CHARS],
        episode=eval_episode(record),
        earlier=earlier,
        log=log,
    )


class TrajectoryIndex:
    """Line offsets and summaries of one ``trajectories.jsonl``, refreshed incrementally.

    :attr:`entries` holds every line (its number is its place there); the queries (:meth:`select`,
    :meth:`steps`, :meth:`groups`, :meth:`stop_reasons`, :meth:`count`) see only the lines that count, an
    eval episode's earlier attempts and the steps a resumed run logged again left out (:meth:`counts`).
    """

    def __init__(self, path: str | Path, earlier: Sequence[tuple[Path, int]] = ()):
        """``earlier``: the logs of the runs this one continues, oldest first, each with the step of the
        checkpoint the run after it resumed from (:func:`~swift_rlfactory.runs.resume.run_chain`)."""
        self.path = Path(path)
        self._checkpoints = [step for _, step in earlier]
        self._tail = ChainTail([*(log for log, _ in earlier), self.path], scan)
        self._lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        self.entries = Entries(self)  # a training line is parsed whole only when a page shows it
        self._last: dict[tuple[int, int], int] = {}  # eval episode -> number of its last line
        self._attempts = 0  # eval lines a later line of the same episode replaced
        self._steps = StepLines()  # the training lines that count, by number
        self._log = 0  # the log of the chain the last training line was in
        # a training line of a run that stopped -> the first line of the run resumed after it
        self._resumed: dict[int, int] = {}

    @property
    def skipped(self) -> int:
        """Lines that are not JSON objects (a torn last line is not one: it is read whole on a later refresh)."""
        return self._tail.skipped

    def refresh(self) -> int:
        """Index lines appended since the last call; returns how many were added."""
        with self._lock:
            restarted, records = self._tail.read()
            if restarted:  # another file now: start over
                self._start()
            added = 0
            for log, record in records:
                self._add(log, record.offset, record.value)
                added += 1
            return added

    def _add(self, log: int, offset: int, record: Scanned | dict[str, Any]) -> None:
        number = len(self.entries)
        if isinstance(record, Scanned):
            self._count_step(log, number, record.step)
            self.entries.lines.append(Line(number, offset, record.step, record.stop_reason, log))
            return
        episode = eval_episode(record)
        earlier: tuple[int, ...] = ()
        if episode is not None:
            if episode in self._last:
                last = self.entries[self._last[episode]]
                earlier = (*last.earlier, last.number)
                self._attempts += 1
            self._last[episode] = number
        entry = summarize(number, offset, record, earlier, log)
        if episode is None and entry.step is not None:
            self._count_step(log, number, entry.step)
        self.entries.lines.append(entry)

    def _count_step(self, log: int, number: int, step: int) -> None:
        """Feed training line ``number`` of ``step`` to the resume rule."""
        replaced = [n for c in self._checkpoints[self._log : log] for n in self._steps.resume(c)]
        self._log = log
        replaced += self._steps.add(step, number)  # a resumed run: this step and later again
        for n in replaced:
            self._resumed[n] = number

    def parse(self, line: Line) -> Entry:
        """The :class:`Entry` of a line indexed by a scan, its line read again and parsed whole (a line
        that no longer reads as a JSON object keeps what the scan read, and no more)."""
        with open(self._tail.paths[line.log], "rb") as f:
            f.seek(line.offset)
            record = json_object(f.readline())
        if record is None:
            return Entry(
                line.number, line.offset, line.step, "", "", None, line.stop_reason, 0, 0, 0, log=line.log
            )
        return summarize(line.number, line.offset, record, (), line.log)

    def counts(self, entry: Entry | Line) -> bool:
        """Whether ``entry`` is a line that counts: not an eval episode's attempt that a later line replaced,
        nor a training line of a step that a resumed run logged again."""
        if entry.episode is None:
            return entry.number not in self._resumed
        return self._last.get(entry.episode) == entry.number

    def latest(self, entry: Entry) -> Entry:
        """The line that counts for ``entry``'s episode (``entry`` itself unless a later attempt replaced it)."""
        return entry if entry.episode is None else self.entries[self._last[entry.episode]]

    def current(self) -> list[Entry]:
        """The entries that count, in log order."""
        return [self.entries[line.number] for line in self._counted()]

    def _counted(self) -> Iterator[Entry | Line]:
        """The lines that count, in log order, parsed or not."""
        return (line for line in self.entries.lines if self.counts(line))

    def resumed_by(self, entry: Entry) -> Entry | None:
        """For a training line of a run that stopped, the first line of the run resumed after it (which
        logs its step and every later one again); ``None`` for a line that counts, or an eval line."""
        number = self._resumed.get(entry.number)
        return None if number is None else self.entries[number]

    def replaced(self) -> int:
        """How many lines are earlier attempts of an eval episode that a later line replaced."""
        return self._attempts

    def relogged(self) -> int:
        """How many training lines are of steps that a resumed run logged again."""
        return len(self._resumed)

    def count(self) -> int:
        """How many trajectories the log holds, an episode retried or re-run counted once, a step logged
        again by a resumed run counted as the resumed run logged it."""
        return len(self.entries) - self._attempts - len(self._resumed)

    def read(self, number: int) -> dict[str, Any]:
        """The whole record of entry ``number`` (one seek, one line)."""
        entry = self.entries[number]
        with open(self._tail.paths[entry.log], "rb") as f:
            f.seek(entry.offset)
            return json.loads(f.readline())

    def steps(self) -> list[int]:
        """Distinct steps, in order."""
        return sorted({e.step for e in self._counted() if e.step is not None})

    def stop_reasons(self) -> list[str]:
        """Distinct stop reasons."""
        return sorted({e.stop_reason for e in self._counted() if e.stop_reason})

    def groups(self, step: int | None = None) -> OrderedDict[str, list[Entry]]:
        """Entries of ``step`` (or all) by group, in order of first appearance."""
        out: OrderedDict[str, list[Entry]] = OrderedDict()
        for entry in self.current():
            if step is None or entry.step == step:
                out.setdefault(entry.group, []).append(entry)
        return out

    def group_choices(
        self, step: int | None = None, selected: str | None = None, limit: int = GROUPS
    ) -> list[str]:
        """The groups the page's dropdown offers: at most ``limit`` of ``step``'s (all steps': of the last
        step, where the log has steps), in order of first appearance, and ``selected`` (the one shown now)
        among them; a log of 50 000 questions never becomes a dropdown of 50 000. Any other group is
        reached by its step, or by the text search (the prompt)."""
        if step is None:
            step = max((e.step for e in reversed(self.entries.lines) if e.step is not None), default=None)
        out: dict[str, None] = {}
        for line in self._counted():
            if step is not None and line.step != step:
                continue
            if (group := self.entries[line.number].group) not in out:
                out[group] = None
                if len(out) >= limit:
                    break
        if selected and selected not in out:
            out[selected] = None
        return list(out)

    def select(self, filters: Filters, limit: int = 200) -> list[Entry]:
        """Entries matching ``filters``, at most ``limit`` (the page never gets the whole log)."""
        needle = filters.text.strip().casefold()
        matches = self._text_matches(needle) if needle else None
        out = []
        for line in self._counted():
            if filters.step is not None and line.step != filters.step:
                continue
            entry = self.entries[line.number]
            if filters.group and entry.group != filters.group:
                continue
            if filters.reward_min is not None and (entry.reward is None or entry.reward < filters.reward_min):
                continue
            if filters.reward_max is not None and (entry.reward is None or entry.reward > filters.reward_max):
                continue
            if filters.stop_reason and entry.stop_reason != filters.stop_reason:
                continue
            if filters.tool_errors_only and not entry.tool_errors:
                continue
            if matches is not None and entry.number not in matches:
                continue
            out.append(entry)
            if len(out) >= limit:
                break
        return out

    def _text_matches(self, needle: str) -> set[int]:
        """Numbers of entries whose line contains ``needle`` (casefolded), by one scan of the file.

        The needle is matched as typed and as JSON escapes it, both with non-ASCII text raw (how
        :class:`~swift_rlfactory.runs.log.TrajectoryLog` writes) and as ``\\uXXXX`` (``json.dumps``'
        default), so text with quotes, newlines or non-ASCII characters is found too. Case is ignored by
        Unicode rules (``Москва`` finds ``МОСКВА``, ``strasse`` finds ``Straße``); only a line holding
        non-ASCII bytes is decoded for that, an ASCII line is lowered as bytes, which is the same and
        much faster. (Escaped ``\\uXXXX`` text is matched in the case it was logged in.)
        """
        forms = {needle, json.dumps(needle, ensure_ascii=False)[1:-1], json.dumps(needle)[1:-1]}
        ascii_forms = [form.encode() for form in forms if form.isascii()]
        by_offset = {(e.log, e.offset): e.number for e in self.entries.lines}
        found: set[int] = set()
        for log, path in enumerate(self._tail.paths):
            try:
                f = open(path, "rb")  # noqa: SIM115 - closed by the with below
            except FileNotFoundError:  # removed since it was indexed: no line to match
                continue
            with f:
                offset, end = 0, self._tail.end(log)
                for line in f:
                    if offset >= end:
                        break
                    if (log, offset) in by_offset:
                        if line.isascii():
                            lowered = line.lower()
                            hit = any(form in lowered for form in ascii_forms)
                        else:
                            folded = line.decode(errors="replace").casefold()
                            hit = any(form in folded for form in forms)
                        if hit:
                            found.add(by_offset[log, offset])
                    offset += len(line)
        return found
