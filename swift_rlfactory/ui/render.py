"""One trajectory as HTML, turn by turn: what the model wrote, what it called, what it saw, what it scored.

Pure functions over the plain dicts of ``trajectories.jsonl``; all text is escaped. What is shown, and
when: docs/ui.md#the-trajectory-viewer.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from swift_rlfactory.runs.eval_log import is_failed

from ..trajectory import history_turns
from .index import Entry, as_number, error_of, items

# Keys a tool call may carry with the whole result when the observation was cut to the token budget
UNTRUNCATED_KEYS = ("untruncated", "full_observation", "raw_observation")
SHOWN_CHARS = 20_000  # of one error or message on the page

STYLE = """
<style>
.rlf-traj {font-family: ui-sans-serif, system-ui, sans-serif; font-size: 14px; line-height: 1.4}
.rlf-traj pre {white-space: pre-wrap; word-break: break-word; margin: 4px 0; padding: 6px 8px;
  background: #f6f7f9; border-radius: 6px; font-size: 13px}
.rlf-turn {border-left: 3px solid #6b8afd; padding: 2px 0 2px 10px; margin: 10px 0}
.rlf-call {border: 1px solid #dde1e7; border-radius: 6px; padding: 6px 8px; margin: 6px 0}
.rlf-error {color: #b00020; font-weight: 600}
.rlf-failed {border: 1px solid #b00020; border-radius: 6px; padding: 6px 10px; margin: 8px 0;
  background: #fff5f6}
.rlf-failed pre {max-height: 16em; overflow: auto}
.rlf-meta {color: #5f6b7a; font-size: 12px}
.rlf-attempts {border: 1px solid #c9a227; border-radius: 6px; padding: 4px 10px; margin: 8px 0;
  background: #fffbea; font-size: 13px}
.rlf-rewards td, .rlf-rewards th {padding: 2px 10px; text-align: left}
</style>
"""


def _cut(text: str) -> str:
    extra = len(text) - SHOWN_CHARS
    return text if extra <= 0 else f"{text[:SHOWN_CHARS]}\n… ({extra} more characters in the log)"


def _pre(text: Any) -> str:
    shown = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    return f"<pre>{escape(_cut(shown))}</pre>"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def per_turn_scores(record: dict[str, Any]) -> dict[str, list[float]]:
    """Per-turn reward lists: a list-valued entry of ``rewards`` or a ``turn_rewards``/``turn_scores`` field."""
    out = {k: v for k, v in _dict(record.get("rewards")).items() if isinstance(v, list)}
    for key in ("turn_rewards", "turn_scores"):
        value = record.get(key)
        if isinstance(value, list):
            out[key] = value
        elif isinstance(value, dict):
            out.update({k: v for k, v in value.items() if isinstance(v, list)})
    return out


def rewards_table(record: dict[str, Any]) -> str:
    """Every reward component and the total, then any per-turn scores."""
    rewards = _dict(record.get("rewards"))
    rows = "".join(
        f"<tr><td>{escape(str(name))}</td><td>{value:.4g}</td></tr>"
        for name, value in rewards.items()
        if as_number(value) is not None and name != "total"
    )
    total = as_number(rewards.get("total"))
    if total is not None:
        rows += f"<tr><th>total</th><th>{total:.4g}</th></tr>"
    for name, why in _dict(record.get("reward_errors")).items():
        rows += (
            f'<tr><td class="rlf-error">{escape(str(name))}</td><td>fallback: {escape(str(why))}</td></tr>'
        )
    for name, scores in per_turn_scores(record).items():
        cells = ", ".join(f"{s:.3g}" if as_number(s) is not None else escape(str(s)) for s in scores)
        rows += f"<tr><td>{escape(name)} (per turn)</td><td>{cells}</td></tr>"
    return f'<table class="rlf-rewards"><tr><th>reward</th><th>value</th></tr>{rows}</table>'


def tool_call_html(call: dict[str, Any]) -> str:
    """One call: tool, arguments, the observation as the model saw it, the uncut result, error, timing."""
    status = "cache hit" if call.get("cache_hit") else "cache miss"
    latency = as_number(call.get("latency_s")) or 0.0
    meta = f"latency {latency * 1000:.1f} ms · {status} · attempts {call.get('attempts', 0)}"
    parts = [
        f'<div class="rlf-call"><b>call</b> <code>{escape(str(call.get("tool")))}</code>',
        _pre(json.dumps(call.get("arguments"), ensure_ascii=False, indent=1)),
        "<b>observation</b>",
        _pre(call.get("observation") or ""),
    ]
    for key in UNTRUNCATED_KEYS:
        if call.get(key) and call.get(key) != call.get("observation"):
            parts.append(f"<details><summary>untruncated result</summary>{_pre(call[key])}</details>")
            break
    if call.get("error"):
        parts.append(f'<div class="rlf-error">error: {escape(str(call["error"]))}</div>')
    parts.append(f'<div class="rlf-meta">{escape(meta)}</div></div>')
    return "".join(parts)


def episode_error_html(record: dict[str, Any]) -> str:
    """The episode's own error, if it has one: a failed eval episode (with its question, since it has no
    conversation) or a training trajectory that stopped with ``error``."""
    error = error_of(record)
    if is_failed(record):
        question = record.get("question")
        return (
            '<div class="rlf-failed"><div class="rlf-error">episode failed on every attempt: no '
            "trajectory, counted as a wrong answer (0) in metrics.json; the next eval run with the same "
            "--output tries it again</div>"
            f"<b>error</b>{_pre(error or '(no error text logged)')}"
            + (f"<b>question</b>{_pre(question)}" if isinstance(question, str) else "")
            + "</div>"
        )
    if error:
        return f'<div class="rlf-failed"><div class="rlf-error">error</div>{_pre(error)}</div>'
    return ""


def attempts_html(entry: Entry, latest: Entry, earlier: list[Entry]) -> str:
    """Where a line stands among the attempts of its eval episode (replaced by a later line, or the latest of
    several); empty for an episode tried once and for a training line.
    """
    if entry.episode is None:
        return ""
    index, sample = entry.episode
    if latest.number != entry.number:
        return (
            f'<div class="rlf-attempts">an earlier attempt of question {index} · sample {sample}: trajectory '
            f"#{latest.number} replaced it and is the one that counts</div>"
        )
    if not earlier:
        return ""
    before = ", ".join(f"#{e.number} ({escape(e.stop_reason or '?')})" for e in earlier)
    return (
        f'<div class="rlf-attempts">attempt {len(earlier) + 1} of question {index} · sample {sample}; '
        f"earlier attempts: {before}</div>"
    )


def resumed_html(resumed: Entry | None) -> str:
    """For a training line of a run that stopped, ``resumed`` being the first line of the run resumed
    after it: that this line no longer counts. Empty when ``resumed`` is ``None``.
    """
    if resumed is None:
        return ""
    return (
        f'<div class="rlf-attempts">from a run that stopped: the run resumed at step {resumed.step} '
        f"(trajectory #{resumed.number}) logs that step and every later one again, and its lines are the "
        "ones that count</div>"
    )


def trajectory_html(record: dict[str, Any], title: str = "", attempts: str = "") -> str:
    """The whole trajectory: its place among its episode's ``attempts``, its error, prompt, each
    assistant turn with its calls, the rewards.
    """
    calls_by_turn: dict[int, list[dict[str, Any]]] = {}
    for call in items(record, "tool_calls"):
        turn = call.get("turn")
        calls_by_turn.setdefault(turn if isinstance(turn, int) else 0, []).append(call)
    scores = per_turn_scores(record)
    total = as_number(_dict(record.get("rewards")).get("total"))
    turns = record.get("turns")
    turns = turns if isinstance(turns, int) and not isinstance(turns, bool) else 0
    where = (
        f"question {record.get('index')} · sample {record.get('sample')}"
        if "index" in record
        else f"step {record.get('step')}"
    )
    if is_failed(record):
        head = f"{where} · failed · not scored"
    else:
        stop = record.get("stop_reason") or "?"
        head = f"{where} · {turns} turns · stop: {stop} · reward {'?' if total is None else f'{total:.4g}'}"
    parts = [STYLE, '<div class="rlf-traj">']
    if title:
        parts.append(f"<h4>{escape(title)}</h4>")
    parts.append(f'<div class="rlf-meta">{escape(head)}</div>')
    parts.append(attempts)
    parts.append(episode_error_html(record))
    messages = items(record, "messages")
    history = history_turns(messages, turns)
    turn = -history  # the row's own assistant messages come first; turn 1 is the first generated one
    for message in messages:
        role, content = message.get("role"), message.get("content") or ""
        if role == "system":
            parts.append(f"<details><summary>system prompt</summary>{_pre(content)}</details>")
        elif role == "user":
            parts.append(f"<b>user</b>{_pre(content)}")
        elif role == "assistant" and turn < 0:  # chat history: no turn, no turn score, no calls
            turn += 1
            parts.append(f"<b>assistant · history</b>{_pre(content)}")
        elif role == "assistant":
            turn += 1
            per_turn = "; ".join(
                f"{escape(k)} {v[turn - 1]:.3g}"
                for k, v in scores.items()
                if len(v) >= turn and as_number(v[turn - 1]) is not None
            )
            parts.append(f'<div class="rlf-turn"><b>assistant · turn {turn}</b>')
            if per_turn:
                parts.append(f'<div class="rlf-meta">turn score: {per_turn}</div>')
            parts.append(_pre(content))
            parts.extend(tool_call_html(call) for call in calls_by_turn.get(turn, []))
            parts.append("</div>")
        # `tool` messages are the observations, shown under the call that produced them
    if not is_failed(record):  # a failed episode was never scored
        parts.append(rewards_table(record))
    parts.append("</div>")
    return "".join(parts)
