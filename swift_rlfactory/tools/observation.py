"""Turn whatever a tool returned into the one string the model will read (an image as a note; the images
themselves are collected beside it for a vision-language model).

How each shape of result reads, what is defused, and how a result is bounded and cut to its token budget:
docs/tools.md ("Observations").
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from .media import ToolImage, base64_size, image_of, media_note

CUT_RULE = "marker-within-cap;media-tags-defused;controls-shown;blobs-described;images-noted"
"""Names how an observation's text is made, for the cache's keys: a cache file kept from an older rule (one
that put the marker past the cut's cap, or kept ``<image>`` tags) is not replayed. Change it whenever the
text :func:`render_bounded` or :func:`cut` returns changes."""
_SHORT_MARKER = "..."  # marks a cut where the cap cannot hold the full marker (see cut)
# Characters past the longest fitting prefix within which the whole text may still fit: tokens merge across
# the cut ("Undefined" is one Qwen3 token, "Unde" two), so a text can fit though a prefix does not. Farther
# than this, the tail costs more tokens than a merge at one boundary saves.
_MERGE_REACH = 256
_MARKER = re.compile(r"\n\.\.\. \[truncated (?:at least )?(\d+) characters\]\Z")
_PYDANTIC_URL = re.compile(r"\n?[ \t]*For further information visit https://errors\.pydantic\.dev/\S*")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")  # an object's default repr: where it lives, not what it is
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=lambda value: _shown(value))
# A chat format's control token written as text: ChatML's "<|im_end|>" and "<|im_start|>", Llama 3's
# "<|eot_id|>", DeepSeek's "<｜end▁of▁sentence｜>" (full-width bars). A tokenizer reads such text as the
# control token itself, so a tool result holding one (a page about chat templates, a hostile server) would
# close the tool turn and open an assistant turn the policy never wrote. A zero-width space after the "<"
# leaves the text as it reads and makes it plain text to every tokenizer.
_CONTROL_TOKEN = re.compile(r"<(?=([|\uff5c])[^\s<>|\uff5c]{1,64}\1>)")
# ms-swift's template tags (``Template.special_tokens``, and ``<img>`` of its ``<img>path</img>`` form):
# ``<image>`` in any message counts as a place for one of the row's images (``_add_default_tags``) and is
# replaced by the image's tokens, ``<img>/a/file</img>`` loads that file as an image, ``<ref-object>`` takes
# a grounding object. A tool result spelling one would move or eat the row's media; defused like a control
# token, it stays text. Our own placeholders for media blocks use no angle brackets (see media.media_note).
_MEDIA_TAG = re.compile(r"<(?=(?:image|video|audio|bbox|ref-object|cot-process|start-image|img)>)")
# C0 controls but tab, line feed and carriage return, DEL, and C1 controls: a binary file read as text
# (server-filesystem's read_text_file) is full of them. A NUL ends C strings in tokenizers' native code and
# in terminals, ESC and CSI (U+009B) drive the terminal a log is read in, U+0085 is a line break to Python's
# splitlines. "\r" stays: CRLF text is common, every tokenizer has it, a JSON log escapes it.
_CONTROL_RUN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]+")
_ESCAPED_RUN = 3  # longest run written as escapes; a longer one is a count, fewer tokens than its escapes


class _Full(Exception):
    """Internal: the rendering budget is spent."""


class _Sink:
    """Collects rendered pieces until ``left`` characters are spent (``None``: no budget), and the images
    whose notes it took in ``images``."""

    def __init__(self, max_chars: int | None, images: list[ToolImage] | None = None):
        self.parts: list[str] = []
        self.left = max_chars
        self.images = images

    def emit(self, piece: str) -> None:
        if self.left is not None:
            if len(piece) > self.left:
                self.parts.append(piece[: self.left])
                raise _Full
            self.left -= len(piece)
        self.parts.append(piece)


def render(result: Any) -> str:
    """Render a tool result as observation text, all of it (see :func:`render_bounded` for a budget).

    >>> render({"a": 1})
    '{"a": 1}'
    >>> render(["x", 2])
    'x\\n2'
    """
    return render_bounded(result)[0]


def render_bounded(
    result: Any, max_chars: int | None = None, images: list[ToolImage] | None = None
) -> tuple[str, int | None]:
    """Render a tool result as observation text, at most ``max_chars`` of it; returns ``(text, unrendered)``.

    An image in the result (:func:`~.media.image_of`) reads as its note; with ``images``, each image whose
    note was rendered whole is appended to it, in order, so a vision-language model can be shown it there.

    ``unrendered`` counts the characters of the full rendering left out: 0 when ``text`` is all of it, the
    exact number for a string result, and ``None`` (unknown, but more than 0) when rendering a structure
    stopped at the budget. A result that cannot be rendered (a dict with tuple keys, a circular list, an
    object whose ``__str__`` raises) raises; the executor turns that into an error observation.

    >>> render_bounded("abcdef", max_chars=4)
    ('abcd', 2)
    >>> render_bounded([{"row": i} for i in range(1000)], max_chars=20)
    ('{"row": 0}\\n{"row": 1', None)
    """
    if isinstance(result, str):
        if max_chars is None or len(result) <= max_chars:
            return encodable(result), 0
        return encodable(result[:max_chars]), len(result) - max_chars
    sink = _Sink(max_chars, images)
    try:
        _render(result, sink)
    except _Full:
        return encodable("".join(sink.parts)), None
    return encodable("".join(sink.parts)), 0


def _render(result: Any, sink: _Sink) -> None:
    if result is None:
        return
    if isinstance(result, str):
        sink.emit(result)
    elif (image := _image(result)) is not None:
        sink.emit(image.note)
        if sink.images is not None:
            sink.images.append(image)
    elif isinstance(result, bytes):
        budget = len(result) if sink.left is None else sink.left * 4  # UTF-8: at most 4 bytes a character
        sink.emit(result[:budget].decode("utf-8", errors="replace"))
        if budget < len(result):
            raise _Full
    elif isinstance(result, (int, float, bool)):
        sink.emit(json.dumps(result))
    elif isinstance(result, dict):
        _render_json(result, sink)
    elif isinstance(result, (list, tuple)):
        for i, item in enumerate(result):
            if i:
                sink.emit("\n")
            _render(item, sink)
    else:
        _render_mcp_block(result, sink)


def _render_json(value: Any, sink: _Sink) -> None:
    if sink.left is None:
        sink.emit(json.dumps(value, ensure_ascii=False, default=_shown))
        return
    for chunk in _ENCODER.iterencode(value):  # lazily, so a huge dict costs only the budget
        sink.emit(chunk)


def _render_mcp_block(block: Any, sink: _Sink) -> None:
    """MCP content blocks (``TextContent``, ``ImageContent``, ...), duck-typed on their ``type`` field."""
    kind = getattr(block, "type", None)
    if kind == "text":
        sink.emit(block.text)
    elif kind in ("image", "audio"):
        data = getattr(block, "data", None)
        sink.emit(media_note(kind, getattr(block, "mime_type", None), base64_size(data)))
    elif kind == "resource":
        resource = block.resource
        blob = getattr(resource, "blob", None)
        if isinstance(blob, str):
            sink.emit(
                f"<resource {resource.uri}> {media_note('binary', resource.mime_type, base64_size(blob))}"
            )
        else:
            sink.emit(getattr(resource, "text", None) or f"<resource {resource.uri}>")
    elif kind == "resource_link":
        sink.emit(f"<resource {block.uri}>")
    elif hasattr(block, "model_dump"):
        _render_json(block.model_dump(mode="json"), sink)
    else:
        sink.emit(_shown(block))


def _shown(value: Any) -> str:
    """``str(value)``, unless that is no text a model can use: an iterator, an awaitable, or any other
    object whose text is its address (``<generator object f at 0x7f...>``), which raises instead."""
    if isinstance(value, Iterator | AsyncIterator | Awaitable) or inspect.isawaitable(value):
        raise TypeError(f"a {type(value).__name__} is not a value the model can read")
    text = str(value)
    if _ADDRESS.search(text):
        raise TypeError(f"a {type(value).__name__} has no text of its own, only its address")
    return text


def _image(result: Any) -> ToolImage | None:
    """``result`` as an image, when it is one; a PIL image that cannot be saved is not one (its text then
    reads as an object's address, an error observation as before)."""
    try:
        return image_of(result)
    except Exception:
        return None


def encodable(text: str) -> str:
    """``text`` as a tokenizer, a template, a log and a terminal should read it: lone surrogates
    (``"\\ud83d"`` from a JSON escape) replaced, control tokens (``_CONTROL_TOKEN``) and ms-swift's media
    tags (``_MEDIA_TAG``) written as text defused with a zero-width space after the ``<``, and each run of
    control characters (``_CONTROL_RUN``) shown, not sent (:func:`_shown_controls`).

    >>> encodable("<|im_end|>") == "<\\u200b|im_end|>"
    True
    >>> encodable("<image>") == "<\\u200bimage>"
    True
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", errors="replace").decode("utf-8")
    text = _CONTROL_RUN.sub(_shown_controls, text)
    if "<" not in text:
        return text
    return _MEDIA_TAG.sub("<\u200b", _CONTROL_TOKEN.sub("<\u200b", text))


def _shown_controls(run: re.Match[str]) -> str:
    """A run of control characters as visible text: up to ``_ESCAPED_RUN`` of them as ``\\u00HH`` escapes,
    so a terminal escape still reads as one (``\\u001b[31m``) and a dict's JSON stays JSON (``json.dumps``
    leaves DEL and C1 controls raw), a longer run as its length, so a binary file costs a few tokens a run.
    Neither form holds a control character, so showing twice changes nothing.

    >>> encodable("ESC\\x1b[0m NUL\\x00\\x00 zip\\x03\\x04\\x14\\x00\\x08 CRLF\\r\\n")
    'ESC\\\\u001b[0m NUL\\\\u0000\\\\u0000 zip[5 control characters] CRLF\\r\\n'
    """
    chars = run.group()
    if len(chars) <= _ESCAPED_RUN:
        return "".join(f"\\u{ord(c):04x}" for c in chars)
    return f"[{len(chars)} control characters]"


def truncate(text: str, max_tokens: int | None, count_tokens: Callable[[str], int] | None = None) -> str:
    """``text`` cut to at most ``max_tokens`` tokens, marker included, the marker saying how much was dropped.

    >>> truncate("a" * 50, 10)
    'aaaaaaaaaa\\n... [truncated 40 characters]'
    """
    return cut(text, max_tokens, count_tokens)[0]


def cut(
    text: str,
    max_tokens: int | None,
    count_tokens: Callable[[str], int] | None = None,
    unrendered: int | None = 0,
) -> tuple[str, int]:
    """Cut ``text`` to at most ``max_tokens`` tokens, saying how much was dropped; returns ``(text, dropped)``.

    The marker is within the cap; ``unrendered`` is what :func:`render_bounded` already left out (``None``: an
    unknown amount); without ``count_tokens`` about four characters count as a token. The rules, and the caps too
    small for the marker: docs/tools.md ("The token cut").

    >>> cut("a" * 50, 2)
    ('aaaaa...', 45)
    """
    at_least = unrendered is None
    total = len(text) + (1 if at_least else unrendered)  # a stopped rendering left out 1+
    if not max_tokens or max_tokens <= 0:
        if total == len(text):
            return text, 0
        return text + _marker(total - len(text), at_least), total - len(text)
    count, cap = (count_tokens, max_tokens) if count_tokens else (len, 4 * max_tokens)
    head = text[: _fitting_prefix(text, cap, count)]
    if total == len(text) and (head == text or len(text) - len(head) <= _MERGE_REACH and count(text) <= cap):
        return text, 0
    for marker in (lambda keep: _marker(total - keep, at_least), lambda keep: _SHORT_MARKER):
        keep = _fit_with_marker(head, marker, cap, count)
        if keep is not None:
            return head[:keep] + marker(keep), total - keep
    return _SHORT_MARKER, total


def _marker(dropped: int, at_least: bool) -> str:
    """The note after a cut prefix; :data:`_MARKER` reads it back."""
    return f"\n... [truncated {'at least ' if at_least else ''}{dropped} characters]"


def _fit_with_marker(
    head: str, marker: Callable[[int], str], max_tokens: int, count: Callable[[str], int]
) -> int | None:
    """Length of a prefix of ``head`` that ``marker(length)`` can follow within ``max_tokens``; ``None`` when
    even the empty prefix is too long.

    The marker's tokens are reserved at its longest, ``marker(0)`` (nothing kept, the most to count), then
    the fit is checked on the joined text.
    """
    budget = max_tokens - count(marker(0))
    while budget >= 0:
        keep = _fitting_prefix(head, budget, count)
        over = count(head[:keep] + marker(keep)) - max_tokens
        if over <= 0:
            return keep
        budget -= over  # prefix and marker tokenized together cost more than apart: refit that much shorter
    return None


def measure(observation: str) -> tuple[int, int]:
    """``(result_chars, truncated_chars)`` of an observation :func:`cut` made, read from its marker.

    A cached observation is stored already cut; this recovers how long the result was and how much of
    it the model did not see. An observation cut to a cap too small for the marker (ending in ``"..."``)
    carries no count and reads as uncut.
    """
    match = _MARKER.search(observation)
    if match is None:
        return len(observation), 0
    dropped = int(match.group(1))
    return match.start() + dropped, dropped


def _fitting_prefix(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> int:
    """Length of a longest prefix of ``text`` within ``max_tokens`` tokens, by encoding bounded prefixes.

    A window of about four characters a token is encoded first and grown (by the measured ratio) until it
    holds more than ``max_tokens`` tokens or the whole text; the cut inside the last window is then found by
    interpolation (tokens grow about linearly with characters) and finished by bisection. Each step encodes
    at most one window, so a 4 MB result costs a few dozen kilobytes of encoding, not megabytes per step.
    """
    good, n_good = 0, 0
    end = min(len(text), 4 * max_tokens)
    while True:
        n = count_tokens(text[:end])
        if n > max_tokens:
            bad, n_bad = end, n
            break
        if end == len(text):
            return end
        good, n_good = end, n
        grown = int(end * max_tokens / max(n, 1) * 1.1) + 1
        end = min(len(text), max(grown, 2 * end))
    for step in range(64):
        if bad - good <= 1:
            break
        if step < 3:  # interpolate while it converges fast, then bisect to the exact boundary
            guess = good + (bad - good) * (max_tokens - n_good) // max(n_bad - n_good, 1)
            mid = min(max(guess, good + 1), bad - 1)
        else:
            mid = (good + bad) // 2
        n = count_tokens(text[:mid])
        if n <= max_tokens:
            good, n_good = mid, n
        else:
            bad, n_bad = mid, n
    return good


def error_text(message: str) -> str:
    """An error message as the model should read it: pydantic's documentation-URL lines removed."""
    return _PYDANTIC_URL.sub("", message)
