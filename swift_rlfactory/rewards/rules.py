"""Built-in rule rewards: exact match, token F1, answer format and tool use.

The answer is read from the last assistant message's visible reply (reasoning and calls removed by the
parser's own rules), normalised as SQuAD does for every script, except that numbers keep their value.
The rules, with examples: docs/rewards.md#rule-rewards.
"""

from __future__ import annotations

import bisect
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from ..tools.calls import read_reply
from ..tools.calls.scanner import call_arguments
from ..trajectory import Trajectory

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_MINUS = ("-", "\u2212")  # hyphen-minus and the minus sign
# Thousands separated by commas: 1,234,567, and India's lakh and crore grouping, 12,34,567.
_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+|\d{1,2}(?:,\d{2})+,\d{3}")
# A whole answer that is one number may also group its thousands with spaces or underscores: "1 000".
_PLAIN_NUMBER = re.compile(r"([-+\u2212]?)\s*(\d+(?:[ _]\d{3})+(?:\.\d+)?|[\d.,]*\d)\.?")
# One F1 token per character of the scripts written without spaces (kana and CJK ideographs), else a word.
_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_F1_TOKEN = re.compile(f"[{_UNSPACED}]|[^\\s{_UNSPACED}]+")
# A number in text: a sign where no letter or digit of a script written with spaces comes before it
# ("F-16" and "1914-1918" hold none; "温度是-5度" does), a currency sign that may sit between the sign and
# the digits ("-$5"), and digits with "." or "," between digit groups, or a leading-dot decimal (".5").
_NUMERAL = re.compile(rf"(?:(?<![^\W{_UNSPACED}])([-+\u2212]))?([$€£¥₹]?)(\d+(?:[.,]\d+)*|(?<![\w.,])\.\d+)")
_PARSE_ERROR = "could not parse"  # how the executor's record of a call the parser refused begins
# ... and of a call past ``max_calls_per_turn``, which parsed and was only not run (rollout.episode).
_OVER_LIMIT = "could not parse tool call: too many tool calls in one turn"


def visible_reply(text: str) -> str:
    """``text`` as the tool-call parser reads it: without reasoning and without ``<tool_call>`` blocks
    (:func:`~swift_rlfactory.tools.calls.read_reply`; docs/rewards.md).

    >>> visible_reply("<think>Maybe <answer>Paris</answer>?</think> I don't know.")
    " I don't know."
    >>> visible_reply("weighing it up</think><answer>Paris</answer>")
    '<answer>Paris</answer>'
    """
    return read_reply(text).visible


def normalize_answer(text: str) -> str:
    """SQuAD normalisation for every script; numbers keep their value (docs/rewards.md#numbers).

    >>> normalize_answer("The  O’Brien–Smith Act.")
    'obriensmith act'
    >>> normalize_answer("ＢＢＣ。") == normalize_answer("bbc")
    True
    >>> normalize_answer("-1,500.50 people, 1914–1918")
    '-1500.5 people 1914 1918'
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    parts, start, after_number = [], 0, False
    for match in _NUMERAL.finditer(text):
        between = _strip_punctuation(text[start : match.start()])
        if after_number and not between and match.start() > start:
            between = " "  # "1914-1918", "3/4": two numbers, not one
        sign, currency, digits = match.groups()
        currency = "" if currency in string.punctuation else currency  # "$" goes, as SQuAD drops it
        parts += [between, currency, _number_text(sign or "", digits)]
        start, after_number = match.end(), True
    parts.append(_strip_punctuation(text[start:]))
    text = _ARTICLES.sub(" ", "".join(parts))
    return " ".join(text.split())


def _strip_punctuation(text: str) -> str:
    return "".join(
        ch for ch in text if ch not in string.punctuation and not unicodedata.category(ch).startswith("P")
    )


def _number_text(sign: str, digits: str) -> str:
    """The canonical text of a number: ``-`` for a negative one, no ``+``, no thousands separators, no
    trailing decimal zeros ("+1,000.50" is "1000.5", ".5" is "0.5"). Digits whose separators group no
    number ("1,5", "1.2.3") come back with spaces between the groups; leading zeros stay ("007")."""
    minus = "-" if sign in _MINUS else ""
    integer, point, fraction = digits.partition(".")
    if _GROUPED.fullmatch(integer):
        integer = integer.replace(",", "")
    if not (integer == "" or integer.isdigit()) or not (fraction.isdigit() or not point):
        return minus + " ".join(re.split(r"[.,]", digits))
    fraction = fraction.rstrip("0")
    number = (integer or "0") + ("." + fraction if fraction else "")
    return minus + number if number.strip("0.") else number  # -0 is 0


def answer_blocks(text: str, arguments: Sequence[tuple[int, int]] = ()) -> list[str]:
    """The contents of ``text``'s ``<answer>...</answer>`` blocks, in order, as
    ``re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)`` reads them but in linear time; ``arguments``:
    spans of ``text`` (in order, none inside another) whose tags are no tags, the calls' arguments.
    """
    starts = [start for start, _ in arguments]
    blocks, pos = [], 0
    while (start := _tag(text, "<answer>", pos, starts, arguments)) != -1:
        end = _tag(text, "</answer>", start + len("<answer>"), starts, arguments)
        if end == -1:
            break
        blocks.append(text[start + len("<answer>") : end])
        pos = end + len("</answer>")
    return blocks


def _tag(text: str, tag: str, pos: int, starts: list[int], arguments: Sequence[tuple[int, int]]) -> int:
    """Where the next ``tag`` from ``pos`` outside ``arguments`` (which start at ``starts``) is; -1 if none."""
    while (at := text.find(tag, pos)) != -1:
        inside = bisect.bisect_right(starts, at) - 1
        if inside < 0 or arguments[inside][1] <= at:
            return at
        pos = arguments[inside][1]
    return -1


def opens_answer(visible: str) -> bool:
    """Whether a visible reply writes ``<answer>`` outside its calls' arguments (closed or not)."""
    arguments = call_arguments(visible)
    return _tag(visible, "<answer>", 0, [start for start, _ in arguments], arguments) != -1


def reply_answers(visible: str) -> list[str]:
    """The answer blocks of a visible reply (:func:`visible_reply`), an answer tag inside a call's argument
    being the argument's text."""
    return answer_blocks(visible, call_arguments(visible))


def extract_answer(text: str) -> str | None:
    """The content of the last ``<answer>`` block of the visible reply, or ``None`` when there is none."""
    found = reply_answers(visible_reply(text))
    return found[-1].strip() if found else None


def as_number(text: str) -> Decimal | None:
    """The value of a plain number ("-1,234.50", "+7", "12.", "１９８４", "1 000 000"), else ``None``
    (what counts: docs/rewards.md#numbers).
    """
    found = _PLAIN_NUMBER.fullmatch(unicodedata.normalize("NFKC", text).strip())
    if found is None:
        return None
    sign, digits = found.groups()
    number = _number_text(sign, re.sub(r"[ _]", ",", digits))  # "1 000" groups as "1,000" does
    return Decimal(number) if re.fullmatch(r"-?\d+(\.\d+)?", number) else None


def exact_match(prediction: str, golds: list[str]) -> float:
    """1.0 when the prediction equals any golden answer: as numbers when both are plain numbers, else after
    SQuAD normalisation."""
    pred = normalize_answer(prediction)
    value = as_number(prediction)
    for gold in golds:
        gold_value = as_number(gold)
        if value is not None and gold_value is not None:
            if value == gold_value:
                return 1.0
        elif pred == normalize_answer(gold):
            return 1.0
    return 0.0


def token_f1(prediction: str, golds: list[str]) -> float:
    """Best token-overlap F1 of the prediction against the golden answers."""
    pred_tokens = _F1_TOKEN.findall(normalize_answer(prediction))
    best = 0.0
    for gold in golds:
        gold_tokens = _F1_TOKEN.findall(normalize_answer(gold))
        common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
        if common == 0:
            continue
        precision, recall = common / len(pred_tokens), common / len(gold_tokens)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


def _graded_answer(trajectory: Trajectory, require_tag: bool) -> str | None:
    """The text to grade: the ``<answer>`` content, or the whole visible reply when the tag is optional."""
    answer = extract_answer(trajectory.final_response)
    if answer is None and not require_tag:
        answer = visible_reply(trajectory.final_response)
    return answer


def em(trajectory: Trajectory, require_tag: bool = True) -> float:
    """Exact match of the final answer; without an ``<answer>`` tag it scores 0 unless ``require_tag`` is off."""
    answer = _graded_answer(trajectory, require_tag)
    return 0.0 if answer is None else exact_match(answer, trajectory.golden_answers)


def f1(trajectory: Trajectory, require_tag: bool = True) -> float:
    """Token F1 of the final answer against the golden answers."""
    answer = _graded_answer(trajectory, require_tag)
    return 0.0 if answer is None else token_f1(answer, trajectory.golden_answers)


def parse_failed(call: dict[str, Any]) -> bool:
    """Whether a tool-call record is a call the parser could not read (a call past ``max_calls_per_turn``
    is not: it parsed and was only not run); by ``error_kind``, or by the error text of an older record.
    """
    if call.get("error_kind") is not None:
        return call["error_kind"] == "parse"
    error = call.get("error") or ""
    return error.startswith(_PARSE_ERROR) and not error.startswith(_OVER_LIMIT)


def answers_once(text: str) -> bool:
    """Whether an assistant turn is a well-formed answer: exactly one non-empty ``<answer>`` block in its
    visible reply, and no tool call in any format we read, well-formed or not (reasoning may mention
    both). One scan of the text (:func:`~swift_rlfactory.tools.calls.read_reply`)."""
    reply = read_reply(text)
    answers = reply_answers(reply.visible)
    return len(answers) == 1 and bool(answers[0].strip()) and not reply.writes_call


def format_reward(trajectory: Trajectory) -> float:
    """1.0 when the episode ends in one non-empty ``<answer>`` block and no tool call was malformed."""
    if not answers_once(trajectory.final_response):
        return 0.0
    return 0.0 if any(parse_failed(c) for c in trajectory.tool_calls) else 1.0


def tool_use(
    trajectory: Trajectory, max_calls: int = 3, min_calls: int = 1, over_budget_penalty: float = 0.5
) -> float:
    """Share of calls that succeeded, minus ``over_budget_penalty`` per call past ``max_calls``, clipped to
    [-1, 1]; 0 with fewer than ``min_calls`` calls.
    """
    calls = trajectory.tool_calls
    if len(calls) < min_calls or not calls:
        return 0.0
    ok = sum(1 for c in calls if not c.get("error"))
    score = ok / len(calls) - over_budget_penalty * max(0, len(calls) - max_calls)
    return max(-1.0, min(1.0, score))
