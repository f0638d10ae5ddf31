"""What is wrong with a YAML file, told without quoting it.

PyYAML's message for a syntax error prints the offending line with a caret under the column. Our YAML
files hold API keys (a judge's ``api_key``, an MCP server's ``env``), and a key is registered as a secret
only once the file has been read, so a missing closing quote after ``api_key: "sk-...`` would print the
key in the error, the log and the web UI. :func:`describe` keeps PyYAML's words and positions, which
say enough to find the mistake, and drops the quoted line.
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
