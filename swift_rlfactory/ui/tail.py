"""Reading a JSON Lines file that is still being written: each read returns only what was appended since.

When a line counts, when the file is read again from its start, what is skipped and counted: docs/ui.md
("Reading a log while it is written"). A tail is not thread-safe: its reader holds its own lock.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

logger = logging.getLogger(__name__)

HEAD = 256  # bytes of the first line kept to tell the file from another one at the same path


@dataclass(frozen=True)
class Record:
    """One line of the file that holds a JSON object."""

    offset: int  # where the line starts: a reader seeks there to read the line again
    line: int  # its line number, from 1
    value: Any  # the parsed object, or what the tail's ``decode`` made of the line


def json_object(line: bytes) -> dict[str, Any] | None:
    """The JSON object a line holds, ``None`` when it holds none (a leading byte order mark is read as
    UTF-8's)."""
    try:
        value = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


Decode = Callable[[bytes], Any]  # a whole line -> what the tail yields for it, ``None`` for no object


class JsonlTail:
    """The lines of ``path`` appended since the last :meth:`read`; ``decode`` reads each (a reader that
    needs a few fields of a line may read them without parsing it whole)."""

    def __init__(self, path: str | Path, decode: Decode = json_object):
        self.path = Path(path)
        self._decode = decode
        self.skipped = 0  # lines read so far that are not JSON objects
        self._end = 0  # bytes read so far (always at a line boundary)
        self._lines = 0  # whole lines read so far
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file read
        self._head = b""  # how the file starts (its first line, up to HEAD bytes), once read

    @property
    def end(self) -> int:
        """How many bytes of the file have been read (always up to a line end)."""
        return self._end

    def read(self) -> tuple[bool, Iterator[Record]]:
        """``(restarted, records)``: whether the file was replaced since the last read (then ``records``
        start at its first line again), and the new lines that are JSON objects, parsed as they are
        iterated (a big file is never held whole)."""
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - the generator below closes it
        except FileNotFoundError:
            return False, iter(())
        stat = os.fstat(f.fileno())
        identity = (stat.st_dev, stat.st_ino)
        restarted = (
            stat.st_size < self._end or self._identity not in (None, identity) or not self._same_start(f)
        )
        if restarted:
            self.skipped, self._end, self._lines, self._head = 0, 0, 0, b""
        self._identity = identity
        return restarted, self._records(f)

    def _same_start(self, f: IO[bytes]) -> bool:
        """Whether the file still starts as it did when its first line was read (a file emptied and written
        again by a new run starts otherwise: the first line of a log holds a time or a loss)."""
        f.seek(0)
        return f.read(len(self._head)) == self._head

    def _records(self, f: IO[bytes]) -> Iterator[Record]:
        with f:
            f.seek(self._end)
            for line in f:  # a binary file splits at b"\n" only, never inside a JSON string
                if not line.endswith(b"\n"):  # still being written: read it whole next time
                    return
                offset = self._end
                if not offset:
                    self._head = line[:HEAD]
                self._end += len(line)
                self._lines += 1
                if not line.strip():
                    continue
                value = self._decode(line)
                if value is None:
                    self.skipped += 1
                    logger.warning("%s: line %d is not a JSON object; left out", self.path, self._lines)
                    continue
                yield Record(offset, self._lines, value)


class ChainTail:
    """The logs of one run and of the runs it continues (:func:`swift_rlfactory.runs.resume.run_chain`), oldest
    first, read as one: a :class:`JsonlTail` each. When any of them is another file now, every one is read
    again from its start (``restarted``)."""

    def __init__(self, paths: Sequence[str | Path], decode: Decode = json_object):
        self.paths = [Path(p) for p in paths]
        self._decode = decode
        self._tails = [JsonlTail(p, decode) for p in self.paths]

    @property
    def skipped(self) -> int:
        """Lines read so far, in every log, that are not JSON objects."""
        return sum(tail.skipped for tail in self._tails)

    def end(self, log: int) -> int:
        """How many bytes of log ``log`` have been read."""
        return self._tails[log].end

    def read(self) -> tuple[bool, Iterator[tuple[int, Record]]]:
        """``(restarted, records)``: the new lines of every log, each with the log's place in the chain."""
        reads = [tail.read() for tail in self._tails]
        restarted = any(again for again, _ in reads)
        if restarted:
            self._tails = [JsonlTail(p, self._decode) for p in self.paths]
            reads = [tail.read() for tail in self._tails]
        return restarted, ((log, record) for log, (_, records) in enumerate(reads) for record in records)
