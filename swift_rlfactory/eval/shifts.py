"""Phrasing shifts: seeded rewordings of a QA question that keep its answer, in a small open registry.

A shift is ``fn(question, rng) -> str | None`` (``None``: it does not apply to this question). The
built-ins, what each does, and how to add your own: docs/eval.md#robustness-under-phrasing-shifts.
"""

from __future__ import annotations

import copy
import random
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from swift_rlfactory.runtime.user_code import import_target

ShiftFn = Callable[[str, random.Random], "str | None"]


@dataclass(frozen=True)
class Shift:
    """A named shift. ``idempotent``: applying it to its own output gives that output again."""

    name: str
    fn: ShiftFn
    idempotent: bool = False

    @property
    def description(self) -> str:
        """The first line of the function's docstring."""
        return ((self.fn.__doc__ or "").strip().splitlines() or [""])[0]

    def apply(self, question: str, seed: int = 0) -> str | None:
        """The shifted question, or ``None`` when the shift does not apply (or would leave it empty or
        unchanged). The random choices depend only on ``seed``, the shift's name and the question."""
        out = self.fn(question, random.Random(f"{seed}:{self.name}:{question}"))
        if out is None:
            return None
        out = " ".join(out.split())
        return out if out and out != " ".join(question.split()) else None


_REGISTRY: dict[str, Shift] = {}


def register_shift(name: str | None = None, *, idempotent: bool = False) -> Callable[[ShiftFn], ShiftFn]:
    """Decorator registering ``fn(question, rng) -> str | None`` as a shift named ``name`` (default: the
    function's name); ``--shifts all`` then includes it."""

    def wrap(fn: ShiftFn) -> ShiftFn:
        key = name or fn.__name__
        known = _REGISTRY.get(key)
        if known is not None and known.fn is not fn:
            raise ValueError(f"a shift named {key!r} is already registered ({known.fn.__module__})")
        _REGISTRY[key] = Shift(key, fn, idempotent)
        return fn

    return wrap


def registered() -> dict[str, Shift]:
    """Every registered shift by name, the built-ins first."""
    return dict(_REGISTRY)


def resolve_shifts(spec: str, base_dir: Path = Path(".")) -> list[Shift]:
    """The shifts a ``--shifts`` value names: comma-separated ``all``, registered names, ``module:function``
    or ``file.py:function`` targets, and ``.yaml`` files holding a list of any of these (relative paths
    from ``base_dir``). Raises ``ValueError`` for an unknown name or an empty list."""
    chosen: dict[str, Shift] = {}
    for item in (part.strip() for part in spec.split(",")):
        for shift in _resolve_item(item, base_dir) if item else []:
            other = chosen.setdefault(shift.name, shift)
            if other.fn is not shift.fn:
                raise ValueError(f"--shifts: two shifts are named {shift.name!r}")
    if not chosen:
        raise ValueError(f"--shifts {spec!r}: names no shift")
    return list(chosen.values())


def _resolve_item(item: str, base_dir: Path) -> list[Shift]:
    if item == "all":
        return list(_REGISTRY.values())
    if item in _REGISTRY:
        return [_REGISTRY[item]]
    if item.endswith((".yaml", ".yml")):
        path = (base_dir / Path(item).expanduser()).resolve()
        listed = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
        if not isinstance(listed, list) or not all(isinstance(x, str) for x in listed):
            raise ValueError(f"--shifts {item}: not a YAML file holding a list of shift names or targets")
        return [s for x in listed for s in _resolve_item(x, path.parent)]
    target, sep, attr = item.partition(":")
    if not sep or not attr:
        raise ValueError(
            f"--shifts: unknown shift {item!r}: use all, {', '.join(_REGISTRY)} or module:function"
        )
    fn = getattr(import_target(target, base_dir), attr, None)
    if not callable(fn):
        raise ValueError(f"--shifts: {target!r} has no function {attr!r}")
    known = next((s for s in _REGISTRY.values() if s.fn is fn), None)  # decorated: keep its name
    return [known or Shift(attr, fn)]


def shift_row(row: Mapping[str, Any], shift: Shift, seed: int = 0) -> dict[str, Any] | None:
    """A copy of an ms-swift row whose last user message is shifted; every other column (the reference
    answers among them) as it was. ``None`` when the shift does not apply or the message is not text."""
    messages = copy.deepcopy(list(row.get("messages") or []))
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    if last is None or not isinstance(last.get("content"), str):
        return None
    shifted = shift.apply(last["content"], seed)
    if shifted is None:
        return None
    last["content"] = shifted
    return {**row, "messages": messages}


# -- the built-in shifts -------------------------------------------------------------------------------
_BE = r"(is|are|was|were)"
_WH = r"(what|which|who|whom|where|when|how)"
_QUESTION = re.compile(rf"^{_WH}\b(.*)\?\s*$", re.IGNORECASE | re.DOTALL)


def _lower_first(text: str) -> str:
    """``text`` with its first word lowercased when it is a question word ("What" -> "what"); any other
    first word may be a name, and stays as it is."""
    head, _, tail = text.partition(" ")
    return (head.lower() + (" " + tail if tail else "")) if re.fullmatch(_WH, head, re.I) else text


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


@register_shift()
def wh_last(question: str, rng: random.Random) -> str | None:
    """Move the question word to the end: "What is the capital of France?" -> "The capital of France is
    what?"; "Which city is ...?" -> "... is which city?"."""
    found = re.match(rf"^(what|who|which|where|when)\s+{_BE}\s+(.+?)\s*\?\s*$", question, re.I | re.S)
    if found:
        wh, be, rest = found.groups()
        return f"{_upper_first(rest)} {be.lower()} {wh.lower()}?"
    found = re.match(rf"^(which|what)\s+(\w+(?:\s+\w+)?)\s+{_BE}\s+(.+?)\s*\?\s*$", question, re.I | re.S)
    if found:
        wh, noun, be, rest = found.groups()
        return f"{_upper_first(rest)} {be.lower()} {wh.lower()} {noun}?"
    return None


_FRAMES = [  # (pattern at the start of the question, its paraphrase); the first that matches is used
    (r"what is the name of\s+", "Name "),
    (r"name\s+(?!of\b)", "What is the name of "),
    (r"what name fills the blank in\s+", "Which name completes "),
    (r"who (is|was|are|were)\s+", r"Which person \1 "),
    (r"which\s+", "What "),
    (r"what (is|was|are|were)\s+", r"What exactly \1 "),
    (r"where (is|was|are|were)\s+", r"In what place \1 "),
    (r"when (is|was|did)\s+", r"At what time \1 "),
    (r"how many\s+", "What number of "),
]


@register_shift()
def paraphrase(question: str, rng: random.Random) -> str | None:
    """Reword the question's frame: "What is the name of X?" <-> "Name X?", "Which X ...?" -> "What X
    ...?", "Who was ...?" -> "Which person was ...?", "How many" -> "What number of"."""
    for pattern, replacement in _FRAMES:
        found = re.match(pattern, question, re.I)
        if found:
            text = (found.expand(replacement) + question[found.end() :]).rstrip()
            if replacement == "Name ":  # a request ends as one, and a question as one
                return text[:-1] + "." if text.endswith("?") else text
            return text[:-1] + "?" if text.endswith(".") else text
    return None


_POLITE = ("I was wondering, ", "Quick question: ", "Could you help me with this? ", "I'd like to know: ")


@register_shift()
def polite(question: str, rng: random.Random) -> str | None:
    """Open with a polite phrase that holds no information, chosen by the seed: "I was wondering, what is
    X?"; not applied to a question that already opens with one."""
    if question.startswith(_POLITE):
        return None
    prefix = rng.choice(_POLITE)
    return prefix + (_lower_first(question) if prefix.endswith(", ") else question)


_KEEP = re.compile(r"(?<=\w)['’\-](?=\w)|(?<=\d)[.,](?=\d)")  # "O'Brien", "F-16", "3.5", "1,000"


def _dropped(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category.startswith("P") and category != "Pc"  # Pc: "_", a cloze question's blank


@register_shift(idempotent=True)
def lowercase(question: str, rng: random.Random) -> str | None:
    """Lowercase, and drop punctuation other than inside a word or a number ("O'Brien", "F-16", "3.5") and
    the underscores of a blank to fill ("___")."""
    kept = {m.start() for m in _KEEP.finditer(question)}
    text = "".join(" " if _dropped(ch) and i not in kept else ch for i, ch in enumerate(question))
    return " ".join(text.lower().split())


_TYPO_RATE = 0.15


@register_shift()
def typos(question: str, rng: random.Random) -> str | None:
    """Typing errors, seeded: in about 15 % of the lowercase words of 4+ letters (at least one; never a
    capitalised word, which may be a name) two inner letters swap, one drops, or one doubles."""
    words = question.split(" ")
    eligible = [i for i, w in enumerate(words) if re.fullmatch(r"[a-z]{4,}", w)]
    if not eligible:
        return None
    chosen = [i for i in eligible if rng.random() < _TYPO_RATE] or [rng.choice(eligible)]
    for i in chosen:
        word, at = words[i], rng.randrange(1, len(words[i]) - 2)
        kind = rng.choice(("swap", "drop", "double"))
        if kind == "swap" and word[at] != word[at + 1]:
            words[i] = word[:at] + word[at + 1] + word[at] + word[at + 2 :]
        elif kind == "drop":
            words[i] = word[:at] + word[at + 1 :]
        else:
            words[i] = word[: at + 1] + word[at:]
    return " ".join(words)


@register_shift()
def imperative(question: str, rng: random.Random) -> str | None:
    """Ask as a request: "What is X?" -> "Tell me what is X."; "What is the name of X?" -> "Tell me the
    name of X."."""
    found = _QUESTION.match(question.strip())
    if not found:
        return None
    named = re.match(r"what is the name of\s+(.+?)\s*\?\s*$", question.strip(), re.I | re.S)
    if named:
        return f"Tell me the name of {named.group(1)}."
    return f"Tell me {_lower_first(question.strip()).rstrip('?').rstrip()}."
