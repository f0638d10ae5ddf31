"""Lines of a JSON Lines file, split where JSON Lines splits them.

JSON Lines ends a record at ``\\n`` (a ``\\r`` before it is JSON whitespace) and nowhere else. Python's
``str.splitlines`` also breaks at U+2028 and U+2029 (line and paragraph separators), U+0085, form and
vertical feeds, and ``json.dumps(..., ensure_ascii=False)`` writes those characters unescaped inside
strings. A model that writes a line separator into its answer, or a dataset whose text holds one, then
becomes a record that ``splitlines`` cuts in two, with neither half JSON. Every reader of our JSONL files
(datasets, eval logs, recorded trajectories) splits them with :func:`lines`.
"""

from __future__ import annotations


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
