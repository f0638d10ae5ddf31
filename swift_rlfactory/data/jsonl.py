"""Lines of a JSON Lines file, split where JSON Lines splits them, and a dataset file's text as it was saved.

The one place of the line rule (docs/run-folder.md, "JSON Lines") and of the compression rule and text
decoding of dataset files (docs/data.md, "File formats").
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import json
import lzma
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

# UTF-32's little-endian mark begins with UTF-16's: the longer ones are looked for first.
_OTHER_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def lines(text: str) -> list[str]:
    """``text`` split at ``\\n`` only; a text that ends with ``\\n`` has no empty line after it.

    >>> lines('{"a": 1}\\n{"b": 2}\\n')
    ['{"a": 1}', '{"b": 2}']
    >>> lines('{"a": 1}\\n{"b":')  # a torn last line stays a line of its own
    ['{"a": 1}', '{"b":']
    """
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return parts


# suffix -> (name, the magic number its data opens with, decompress, what that raises on bad data)
_COMPRESSIONS: dict[str, tuple[str, bytes, Callable[[bytes], bytes], tuple[type[Exception], ...]]] = {
    ".gz": ("gzip", b"\x1f\x8b", gzip.decompress, (OSError, EOFError, zlib.error)),
    ".bz2": ("bz2", b"BZh", bz2.decompress, (OSError, EOFError, ValueError)),
    ".xz": ("xz", b"\xfd7zXZ\x00", lzma.decompress, (lzma.LZMAError, EOFError)),
}
_ZSTD_SUFFIXES = (".zst", ".zstd")
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def compression(path: str | Path) -> str | None:
    """The compression suffix ``path`` is named with (``.gz``, ``.bz2``, ``.xz``, ``.zst``, ``.zstd``;
    lower case), or ``None``."""
    suffix = Path(path).suffix.lower()
    return suffix if suffix in _COMPRESSIONS or suffix in _ZSTD_SUFFIXES else None


def without_compression(path: str | Path) -> Path:
    """``path`` without its compression suffix, if it has one: ``nq_dev.jsonl.bz2`` -> ``nq_dev.jsonl``."""
    path = Path(path)
    return path.with_suffix("") if compression(path) else path


def format_suffix(path: str | Path) -> str:
    """The lower-case suffix naming the file's format, under any compression: ``nq.JSONL.GZ`` -> ``.jsonl``."""
    return without_compression(path).suffix.lower()


def read_bytes(path: Path) -> bytes:
    """The bytes of ``path``, decompressed when they are gzip, bzip2 or xz data (by name or by magic
    number); ``ValueError`` naming a compressed file that is not complete data of its format, and a
    zstd one, saying to decompress it. ``OSError`` is the caller's."""
    data = path.read_bytes()
    suffix = compression(path)
    if suffix in _ZSTD_SUFFIXES or data.startswith(_ZSTD_MAGIC):
        raise ValueError(
            f"{path}: zstd-compressed, which is not read here (Python's standard library has no zstd "
            f"decoder); decompress it first (zstd -d '{path}') and give the file that writes"
        )
    if suffix is None:  # compressed without being renamed, or not compressed at all
        suffix = next((s for s, (_, magic, *_) in _COMPRESSIONS.items() if data.startswith(magic)), None)
    if suffix is None:
        return data
    name, _, decompress, errors = _COMPRESSIONS[suffix]
    try:
        return decompress(data)
    except errors as exc:  # not of that format, or cut short
        raise ValueError(f"{path}: not a complete {name} file ({exc})") from None


def open_binary(path: Path) -> IO[bytes]:
    """``path`` opened for reading bytes, decompressed as it is read when it is gzip, bzip2 or xz data (by
    name or by magic number, as :func:`read_bytes` tells), so a reader can go line by line through a file
    larger than memory; a zstd one raises ``ValueError`` as in :func:`read_bytes`. Data that turns out not
    to be complete data of its format raises, while it is read, what :data:`DECOMPRESSION_ERRORS` lists.
    ``OSError`` is the caller's."""
    f = open(path, "rb")  # noqa: SIM115 - returned open for the caller to close
    head = f.read(8)
    f.seek(0)
    suffix = compression(path)
    if suffix in _ZSTD_SUFFIXES or head.startswith(_ZSTD_MAGIC):
        f.close()
        read_bytes(path)  # raises its ValueError naming the file
    if suffix is None:
        suffix = next((s for s, (_, magic, *_) in _COMPRESSIONS.items() if head.startswith(magic)), None)
    if suffix is None:
        return f
    f.close()
    return _OPENERS[suffix](path)


_OPENERS: dict[str, Callable[[Path], IO[bytes]]] = {
    ".gz": gzip.GzipFile,
    ".bz2": bz2.BZ2File,
    ".xz": lzma.LZMAFile,
}
# what reading an :func:`open_binary` file raises on data that is not complete data of its format
DECOMPRESSION_ERRORS = (OSError, EOFError, zlib.error, ValueError, lzma.LZMAError)


def read_text(path: Path) -> str:
    """The UTF-8 text of ``path``, without the byte order mark it may start with (:func:`decode`),
    decompressed first when it is compressed (:func:`read_bytes`). ``OSError`` (a missing file, a folder) is
    the caller's to word."""
    return decode(read_bytes(path), path)


def decode(data: bytes, path: Path) -> str:
    """``data``, the bytes of file ``path``, as UTF-8 text without the byte order mark it may start with.

    Raises ``ValueError`` naming the file (and the line and byte, when there is one) for a file in
    another encoding: UTF-16 or UTF-32 (by their byte order mark, or by the NUL bytes no JSON text
    holds), Latin-1 and other legacy encodings (by bytes that are not UTF-8).
    """
    for bom, name in _OTHER_BOMS:
        if data.startswith(bom):
            raise ValueError(f"{path}: the file is {name} text (by its byte order mark); save it as UTF-8")
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: {_where(data, exc.start)}: byte 0x{data[exc.start]:02x} is not UTF-8 "
            "(a Latin-1 or other legacy encoding?); save the file as UTF-8"
        ) from None
    if "\x00" in text:
        raise ValueError(
            f"{path}: {_where(data, data.index(0))}: a NUL byte, which no JSON text holds (a "
            "UTF-16 file without a byte order mark, or not text at all?); save it as UTF-8"
        )
    return text


def decode_line(data: bytes, path: Path, number: int) -> str:
    """Line ``number`` of file ``path`` (its bytes ``data``) as :func:`decode` reads a whole file, for a
    reader that goes line by line; its errors name that line."""
    try:
        return decode(data, path)
    except ValueError as exc:
        raise ValueError(str(exc).replace(f"{path}: line 1,", f"{path}: line {number},", 1)) from None


def records(path: Path, skipped: list[tuple[int, str]] | None = None) -> list[tuple[int, Any]]:
    """``(line number, value)`` of each line of the JSON Lines file ``path`` that is not blank.

    The text is :func:`read_text`'s, so a leading byte order mark and ``\\r\\n`` line ends are read as
    well as plain ``\\n``; the last line may lack its ``\\n``. A line that is not JSON raises
    ``ValueError`` naming the file and line, or, given a ``skipped`` list, is added to it as ``(line
    number, why)`` and read past (:func:`parse_lines`)."""
    return parse_lines(read_text(path), path, skipped)


def parse_lines(text: str, path: Path, skipped: list[tuple[int, str]] | None = None) -> list[tuple[int, Any]]:
    """:func:`records` of ``text``, already read from file ``path`` (named in errors).

    ``skipped``: where a reader that must not stop on one line (a dataset of thousands of questions, a
    log whose writer was killed mid-line) collects the lines that are not JSON, to say so once."""
    found = []
    for number, line in enumerate(lines(text), start=1):
        # A byte order mark may also open a later line, where `cat` joined files that each had one.
        line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        try:
            found.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            why = f"not valid JSON ({exc.msg}, column {exc.colno}): {line[:80]!r}"
            if skipped is None:
                raise ValueError(f"{path}: line {number}: {why}") from None
            skipped.append((number, why))
    return found


def _where(data: bytes, offset: int) -> str:
    """``line N, column M`` of byte ``offset`` of ``data`` (the column counted in bytes, from 1)."""
    line = data.count(b"\n", 0, offset) + 1
    start = data.rfind(b"\n", 0, offset) + 1
    return f"line {line}, column {offset - start + 1}"
