"""What is wrong with a YAML file, told without quoting it (the line may hold an API key).

Why: docs/environments.md#yaml-syntax-errors-do-not-quote-the-file.
"""

from __future__ import annotations

import yaml


def describe(exc: yaml.YAMLError) -> str:
    """``exc`` as ``what it was doing at line L, column C: the problem at line L, column C``.

    >>> try:
    ...     yaml.safe_load('key: "sk-secret\\n')
    ... except yaml.YAMLError as exc:
    ...     print(describe(exc))
    while scanning a quoted scalar at line 1, column 6: found unexpected end of stream at line 2, column 1
    """
    if not isinstance(exc, yaml.MarkedYAMLError):
        return str(exc)  # a ReaderError: a bad character's code and offset, none of the text
    parts = [
        f"{text} at line {mark.line + 1}, column {mark.column + 1}" if mark else text
        for text, mark in ((exc.context, exc.context_mark), (exc.problem, exc.problem_mark))
        if text
    ]
    return ": ".join(parts) or type(exc).__name__
