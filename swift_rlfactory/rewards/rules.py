"""Built-in rule rewards: exact match, token F1, answer format and tool use.

Answers are read from the last assistant message, inside ``<answer>...</answer>`` when present, and only
from its visible reply (:func:`visible_reply`): the text the tool-call parser acts on, with reasoning and
tool-call blocks removed by the parser's own rules. An answer the model only considered in its reasoning
(``<think>Maybe <answer>Paris</answer>?</think> I don't know.``) earns nothing, as a call written there
does not run, and a reply whose ``<think>`` is never closed has no visible answer at all.
Normalisation follows SQuAD (lower case, no punctuation, no articles, single spaces), made to hold for every
script: NFKC first (full-width "ＢＢＣ" is "bbc"), case folding ("Straße" is "strasse"), and every Unicode
punctuation mark dropped with ASCII's ("。", "–", "’": "O’Brien" is "O'Brien"). Token F1 counts each
Chinese or Japanese character as a token, as CMRC and DuReader score Chinese answers (those scripts have no
spaces between words). A trajectory is scored against every golden answer, keeping the best, as in
Search-R1 and FlashRAG. When the prediction
and a golden answer are both plain numbers they are compared as numbers instead: SQuAD's normalisation
drops the minus sign and the decimal point, so "-227" would match "227" and "12.5" would match "125",
which pays a policy for a subtraction written backwards.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from decimal import Decimal
from typing import Any

from ..tools.call_formats import read_reply
from ..tools.parsing import visible_text
from ..trajectory import Trajectory

ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)")
# One F1 token per character of the scripts written without spaces (kana and CJK ideographs), else a word.
_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_F1_TOKEN = re.compile(f"[{_UNSPACED}]|[^\\s{_UNSPACED}]+")
_PARSE_ERROR = "could not parse"  # how the executor's record of a call the parser refused begins
# ... and of a call past ``max_calls_per_turn``, which parsed and was only not run (rollout.episode).
_OVER_LIMIT = "could not parse tool call: too many tool calls in one turn"


def visible_reply(text: str) -> str:
    """``text`` as the tool-call parser reads it: without reasoning and without ``<tool_call>`` blocks.

    The rules are :mod:`~swift_rlfactory.tools.parsing`'s, taken from the parser itself so the two cannot
    drift apart: every ``<think>...</think>`` block is reasoning, so is everything after a ``<think>``
    that is never closed (even one written inside an answer), and a first ``</think>`` with no ``<think>``
    before it closes a think block the chat template opened in the prompt. A reply without tags is all
    visible; Qwen3's empty ``<think>\\n\\n</think>`` leaves only the white space it wrapped.

    >>> visible_reply("<think>Maybe <answer>Paris</answer>?</think> I don't know.")
    " I don't know."
    >>> visible_reply("weighing it up</think><answer>Paris</answer>")
    '<answer>Paris</answer>'
    """
    return visible_text(text)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation for every script: NFKC, case folding, no punctuation (ASCII's and Unicode's), no
    English articles, single spaces.

    >>> normalize_answer("The  O’Brien–Smith Act.")
    'obriensmith act'
    >>> normalize_answer("ＢＢＣ。") == normalize_answer("bbc")
    True
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(
        ch for ch in text if ch not in string.punctuation and not unicodedata.category(ch).startswith("P")
    )
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def extract_answer(text: str) -> str | None:
    """The content of the last ``<answer>`` block of the visible reply, or ``None`` when there is none."""
    found = ANSWER_TAG.findall(visible_reply(text))
    return found[-1].strip() if found else None


def as_number(text: str) -> Decimal | None:
    """The value of a plain number ("-1,234.50", "+7", "12."), else ``None``; thousands separators
    (commas, spaces, underscores) are ignored, words and units are not numbers."""
    compact = re.sub(r"[,_\s]", "", text.strip())
    return Decimal(compact) if _NUMBER.fullmatch(compact) else None


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
    """Whether a tool-call record is a call the parser could not read.

    A call past ``max_calls_per_turn`` parsed fine and is not one: it was only not run (``tool_use`` and
    ``turn_tool_success`` still count it as a call that did not succeed). The record's ``error_kind``
    (``"parse"``, ``"limit"``) says which; a record written before that field existed is told by its error.
    """
    if call.get("error_kind") is not None:
        return call["error_kind"] == "parse"
    error = call.get("error") or ""
    return error.startswith(_PARSE_ERROR) and not error.startswith(_OVER_LIMIT)


def answers_once(text: str) -> bool:
    """Whether an assistant turn is a well-formed answer: exactly one non-empty ``<answer>`` block in its
    visible reply, and no tool call in any format we read, well-formed or not (reasoning may mention
    both). One scan of the text (:func:`~swift_rlfactory.tools.call_formats.read_reply`)."""
    reply = read_reply(text)
    answers = ANSWER_TAG.findall(reply.visible)
    return len(answers) == 1 and bool(answers[0].strip()) and not reply.writes_call


def format_reward(trajectory: Trajectory) -> float:
    """1.0 when the episode ends in exactly one non-empty ``<answer>`` block and no tool call was malformed.

    Shaping for small models: it pays for the protocol (call tools in well-formed blocks, then answer in
    the tag) before they can earn exact-match reward. Only the visible reply counts (see
    :func:`visible_reply`), and only calls the parser could not read are malformed (:func:`parse_failed`).
    """
    if not answers_once(trajectory.final_response):
        return 0.0
    return 0.0 if any(parse_failed(c) for c in trajectory.tool_calls) else 1.0


def tool_use(
    trajectory: Trajectory, max_calls: int = 3, min_calls: int = 1, over_budget_penalty: float = 0.5
) -> float:
    """Reward using tools well: share of calls that succeeded, minus a penalty per call past the budget.

    Returns 0 with fewer than ``min_calls`` calls; otherwise ``ok / total`` minus ``over_budget_penalty``
    for each call beyond ``max_calls``, clipped to [-1, 1].
    """
    calls = trajectory.tool_calls
    if len(calls) < min_calls or not calls:
        return 0.0
    ok = sum(1 for c in calls if not c.get("error"))
    score = ok / len(calls) - over_budget_penalty * max(0, len(calls) - max_calls)
    return max(-1.0, min(1.0, score))
