"""Read near-JSON as the model wrote it: each token written back as strict JSON, one for one, and read by
:func:`json.loads`; a token with no faithful JSON form is an error that quotes the spot."""

from __future__ import annotations

import json
import re
from typing import Any

from .call import MAX_DEPTH, Body, DuplicateKey, near, no_constant, no_duplicates, tail, too_deep
from .tags import TURN_PATTERN, block_end, ends_block, past_end

# One JSON-ish token at a time. Strings use the unrolled-loop form and comments stop at a tag, so that
# matching stays linear in the text (a comment that ran to the end for every block would be quadratic).
# A turn token ends a block as </tool_call> does (the "close" group), even inside a string (no model writes
# one as text), and stops a comment as a tag does.
_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<string>"[^"\\<]*(?:(?:\\.|(?!TURN)<)[^"\\<]*)*")
    | (?P<quoted>'[^'\\<]*(?:(?:\\.|(?!TURN)<)[^'\\<]*)*')
    | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?![\w.]))
    | (?P<literal>(?:true|false|null|True|False|None)(?![\w.]))
    | (?P<punct>[][{}:,])
    | (?P<comment>//(?:[^\n<]|(?!TURN)<(?!/?tool_call>))*|/\*(?:[^*<]|\*(?!/)|(?!TURN)<(?!/?tool_call>))*\*/)
    | (?P<fence>```[\w+-]*)
    | (?P<close></tool_call>|TURN)
    | (?P<open><tool_call>)
    """.replace("TURN", f"(?:{TURN_PATTERN})"),
    re.VERBOSE | re.DOTALL,
)
_TAGS = ("close", "open")
_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|.)|"', re.DOTALL)
_JSON_ESCAPES = frozenset('"\\/bfnrt')
PYTHON_LITERALS = {"True": "true", "False": "false", "None": "null"}
"""Python's literals and the JSON each means: a repair that keeps the value."""
_CLOSER = {"{": "}", "[": "]"}
_COMPLETE = frozenset({"string", "literal", "}", "]"})  # tokens after which closing brackets may be missing
_FENCE = re.compile(r"```[\w+-]*[ \t]*\n?")
SPACE = re.compile(r"\s*")
# :func:`read_one`'s reader, made once: it reads a candidate object at every "{" of a reply's prose
_DECODER = json.JSONDecoder(strict=False, parse_constant=no_constant, object_pairs_hook=no_duplicates)


def read_block(text: str, pos: int, in_block: bool = True) -> Body:
    """Read the JSON values from ``pos`` to the end of the block (or of ``text`` when not ``in_block``)."""
    end = block_end(text, pos) if in_block else len(text)
    resume = past_end(text, end)
    inside = fenced(text, pos, end)
    try:  # the common case, valid JSON: one C call (a successful parse also proves the tag is not in a string)
        value = json.loads(
            text[inside[0] : inside[1]] if inside else text[pos:end],
            strict=False,
            parse_constant=no_constant,
            object_pairs_hook=no_duplicates,
        )
    except DuplicateKey as exc:
        return Body(end, resume, error=str(exc))
    except (ValueError, RecursionError):
        if inside:  # a fence ends right before the tag, so the tag is not inside a string
            return _Lexer(text, inside[0], in_block, stop=(inside[1], resume)).run()
        return _Lexer(text, pos, in_block).run()
    if too_deep(value):
        return Body(end, resume, error=f"the JSON is nested deeper than {MAX_DEPTH} levels")
    return Body(end, resume, values=[value])


def read_one(text: str, pos: int) -> Body:
    """The one JSON value that starts at ``pos``, and where it ends (``end``); text after it is not read."""
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except DuplicateKey as exc:
        return Body(len(text), len(text), error=str(exc))
    except (ValueError, RecursionError):
        return _Lexer(text, pos, in_block=False, single=True).run()
    if too_deep(value):
        return Body(end, end, error=f"the JSON is nested deeper than {MAX_DEPTH} levels")
    return Body(end, end, values=[value])


def fenced(text: str, pos: int, end: int) -> tuple[int, int] | None:
    """Where the text inside a code fence is, when one wraps ``text[pos:end]`` (string methods, not a
    backtracking regex: a fence followed by a megabyte of spaces stays linear)."""
    start = end - len(text[pos:end].lstrip())
    stop = pos + len(text[pos:end].rstrip())
    if not (text.startswith("```", start, end) and text.endswith("```", start, stop)):
        return None
    opened = _FENCE.match(text, start, stop).end()
    return (opened, stop - 3) if opened <= stop - 3 else None


class _Lexer:
    """Token by token: write each one back as strict JSON, refusing any that has no faithful JSON form.

    ``stop``: where the text to read ends and where scanning resumes, when the caller already knows.
    ``single``: read one value and end there (the text after it is someone else's).
    """

    def __init__(
        self, text: str, pos: int, in_block: bool, stop: tuple[int, int] | None = None, single: bool = False
    ):
        self.text, self.pos, self.in_block, self.stop, self.single = text, pos, in_block, stop, single
        self.limit = len(text) if stop is None else stop[0]
        self.values: list[Any] = []
        self.out: list[str] = []  # the value being read, as strict JSON tokens
        self.where: list[int] = []  # where each of them starts in ``text``
        self.stack: list[str] = []
        self.last = ""

    def run(self) -> Body:
        """Read to the end of the block: its values, or the error that stopped them."""
        while True:
            token = _TOKEN.match(self.text, self.pos, self.limit)
            kind = token.lastgroup if token is not None else None
            if self.in_block and kind in _TAGS or token is None and self.pos >= self.limit:
                return self.ended(self.pos, self.pos)
            if token is None or kind in _TAGS:
                if self.text[self.pos] in "\"'":
                    return self.fail(f"a string is never closed: {near(self.text, self.pos)}")
                return self.fail(_stray(self.text, self.pos, bool(self.stack), bool(self.values)))
            done = self.take(token, kind)
            if done is not None:
                return done

    def take(self, token: re.Match[str], kind: str | None) -> Body | None:
        """One token read; the block's result when it ends the block."""
        tok = token.group()
        skipped = (
            kind in ("space", "comment") or not self.stack and (kind == "fence" or tok in (",", "}", "]"))
        )
        if skipped:  # between values: only separators, fences and extra closing brackets
            self.pos = token.end()
            return None
        if not self.stack and tok not in _CLOSER:
            return self.fail(_stray(self.text, self.pos, False, bool(self.values)))
        done = self.bracket(token, kind)
        if done is not None:
            return done
        self.out.append(_strict(kind, tok))
        self.where.append(self.pos)
        self.last = "string" if kind in ("string", "quoted") else "literal" if kind == "literal" else tok
        self.pos = token.end()
        return None if self.stack else self.value_read()

    def bracket(self, token: re.Match[str], kind: str | None) -> Body | None:
        """Brackets opened and closed, and a fence inside a value; the block's result when one ends it."""
        tok = token.group()
        if tok in _CLOSER:
            if len(self.stack) >= MAX_DEPTH:
                return self.fail(f"the JSON is nested deeper than {MAX_DEPTH} levels")
            self.stack.append(tok)
        elif tok in ("}", "]"):
            if _CLOSER[self.stack[-1]] != tok:
                return self.fail(f"{tok!r} does not close {self.stack[-1]!r}: {near(self.text, self.pos)}")
            self.stack.pop()
            if self.out[-1] == ",":  # a trailing comma
                self.out.pop()
                self.where.pop()
        elif kind == "fence":  # fine as the last thing in the block: it closes a fence around the JSON
            after = SPACE.match(self.text, token.end(), self.limit).end()
            if after >= self.limit or self.in_block and ends_block(self.text, after):
                return self.ended(self.pos, after)
            return self.fail(f"a code fence inside the JSON: {near(self.text, self.pos)}")
        return None

    def value_read(self) -> Body | None:
        """A whole value was read: parse it; the block's result when that ends the block."""
        failed = _finish(self.text, self.out, self.where, self.values, self.pos, self.in_block)
        if failed is not None:
            return failed
        if self.single:
            return Body(self.pos, self.pos, values=self.values)
        self.out, self.where = [], []
        return None

    def ended(self, end: int, at: int) -> Body:
        """The body ends at ``end``, the tag (if any) is at ``at``."""
        token = _TOKEN.match(self.text, at, self.limit)
        closed = token and token.lastgroup == "close"
        resume = token.end() if closed else at if self.stop is None else self.stop[1]
        if not self.stack:
            return Body(end, resume, values=self.values)
        if self.last not in _COMPLETE:
            return Body(end, resume, error=f"the JSON stops before it is complete: {tail(self.text, end)}")
        self.out.extend(
            _CLOSER[opener] for opener in reversed(self.stack)
        )  # closing brackets missing at the end
        self.where.extend([end] * len(self.stack))
        failed = _finish(self.text, self.out, self.where, self.values, end, self.in_block)
        return failed or Body(end, resume, values=self.values)

    def fail(self, message: str) -> Body:
        """The block could not be read from where the lexer stands."""
        return _fail(self.text, self.pos, self.in_block, message)


def _strict(kind: str | None, tok: str) -> str:
    """One token as strict JSON, meaning unchanged."""
    if kind == "string":
        return _ESCAPE.sub(_keep_escape, tok[1:-1]).join('""') if "\\" in tok else tok
    if kind == "quoted":
        return _ESCAPE.sub(_keep_escape, tok[1:-1]).join('""')
    if kind == "literal":
        return PYTHON_LITERALS.get(tok, tok)
    return tok


def _keep_escape(match: re.Match[str]) -> str:
    """Inside a string: a bare ``"`` becomes ``\\"``, ``\\'`` becomes ``'``, and an escape JSON does not
    know keeps its backslash as text (``\\d`` stays a backslash and a ``d``)."""
    escaped = match[1]
    if escaped is None:
        return '\\"'
    if escaped == "'":
        return "'"
    if escaped in _JSON_ESCAPES or len(escaped) == 5:
        return match[0]
    return "\\\\" + escaped


def _finish(
    text: str, out: list[str], where: list[int], values: list[Any], pos: int, in_block: bool
) -> Body | None:
    """Parse one re-written value into ``values``; the failed block when even strict JSON cannot read it."""
    strict = "".join(out)
    try:
        values.append(json.loads(strict, strict=False, object_pairs_hook=no_duplicates))
    except DuplicateKey as exc:
        return _fail(text, pos, in_block, str(exc))
    except json.JSONDecodeError as exc:
        index, offset = 0, len(out[0])
        while index + 1 < len(out) and offset <= exc.pos:  # the token the error points at
            index += 1
            offset += len(out[index])
        return _fail(text, pos, in_block, f"not valid JSON ({exc.msg}): {near(text, where[index])}")
    except ValueError:  # Python's own limit: an integer of more than 4300 digits
        return _fail(text, pos, in_block, "a number too long to read (more than 4300 digits)")
    return None


def _fail(text: str, pos: int, in_block: bool, message: str) -> Body:
    """A block that could not be read: it ends at the next tag from ``pos`` (strings cannot be trusted now)."""
    end = block_end(text, pos) if in_block else len(text)
    return Body(end, past_end(text, end), error=message)


def _stray(text: str, pos: int, inside: bool, after: bool) -> str:
    """Why the text at ``pos`` cannot be read, in words the model can act on."""
    if inside:
        return f"not valid JSON, expected a value, key or bracket: {near(text, pos)}"
    if after:
        return f"unexpected text after the JSON: {near(text, pos)}"
    return f"tool call is not a JSON object: {near(text, pos)}"
