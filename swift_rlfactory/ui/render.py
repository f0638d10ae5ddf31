"""One trajectory as HTML, turn by turn: what the model wrote, what it called, what it saw, what it scored.

Pure functions over the plain dicts of ``trajectories.jsonl`` (``Trajectory.to_dict`` plus ``step``), so
the viewer shows a log exactly as written. All text is escaped: a trajectory is model output and tool
output, never markup.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from ..trajectory import history_turns

# Keys a tool call may carry with the whole result when the observation was cut to the token budget
UNTRUNCATED_KEYS = ("untruncated", "full_observation", "raw_observation")

STYLE = """
<style>
.rlf-traj {font-family: ui-sans-serif, system-ui, sans-serif; font-size: 14px; line-height: 1.4}
.rlf-traj pre {white-space: pre-wrap; word-break: break-word; margin: 4px 0; padding: 6px 8px;
  background: #f6f7f9; border-radius: 6px; font-size: 13px}
.rlf-turn {border-left: 3px solid #6b8afd; padding: 2px 0 2px 10px; margin: 10px 0}
.rlf-call {border: 1px solid #dde1e7; border-radius: 6px; padding: 6px 8px; margin: 6px 0}
.rlf-error {color: #b00020; font-weight: 600}
.rlf-meta {color: #5f6b7a; font-size: 12px}
.rlf-rewards td, .rlf-rewards th {padding: 2px 10px; text-align: left}
</style>
"""


def _pre(text: Any) -> str:
    return f"<pre>{escape(text if isinstance(text, str) else json.dumps(text, ensure_ascii=False))}</pre>"


def per_turn_scores(record: dict[str, Any]) -> dict[str, list[float]]:
    """Per-turn reward lists: a list-valued entry of ``rewards`` or a ``turn_rewards``/``turn_scores`` field."""
    out = {k: v for k, v in (record.get("rewards") or {}).items() if isinstance(v, list)}
    for key in ("turn_rewards", "turn_scores"):
        value = record.get(key)
        if isinstance(value, list):
            out[key] = value
        elif isinstance(value, dict):
            out.update({k: v for k, v in value.items() if isinstance(v, list)})
    return out


def rewards_table(record: dict[str, Any]) -> str:
    """Every reward component and the total, then any per-turn scores."""
    rewards = record.get("rewards") or {}
    rows = "".join(
        f"<tr><td>{escape(str(name))}</td><td>{value:.4g}</td></tr>"
        for name, value in rewards.items()
        if isinstance(value, int | float) and name != "total"
    )
    total = rewards.get("total")
    if isinstance(total, int | float):
        rows += f"<tr><th>total</th><th>{total:.4g}</th></tr>"
    for name, why in (record.get("reward_errors") or {}).items():
        rows += (
            f'<tr><td class="rlf-error">{escape(str(name))}</td><td>fallback: {escape(str(why))}</td></tr>'
        )
    for name, scores in per_turn_scores(record).items():
        cells = ", ".join(f"{s:.3g}" if isinstance(s, int | float) else escape(str(s)) for s in scores)
        rows += f"<tr><td>{escape(name)} (per turn)</td><td>{cells}</td></tr>"
    return f'<table class="rlf-rewards"><tr><th>reward</th><th>value</th></tr>{rows}</table>'


def tool_call_html(call: dict[str, Any]) -> str:
    """One call: tool, arguments, the observation as the model saw it, the uncut result, error, timing."""
    status = "cache hit" if call.get("cache_hit") else "cache miss"
    meta = f"latency {float(call.get('latency_s') or 0) * 1000:.1f} ms · {status} · attempts {call.get('attempts', 0)}"
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


def trajectory_html(record: dict[str, Any], title: str = "") -> str:
    """The whole trajectory: prompt, each assistant turn with its calls, the rewards."""
    calls_by_turn: dict[int, list[dict[str, Any]]] = {}
    for call in record.get("tool_calls") or []:
        calls_by_turn.setdefault(int(call.get("turn") or 0), []).append(call)
    scores = per_turn_scores(record)
    total = (record.get("rewards") or {}).get("total")
    head = (
        f"step {record.get('step')} · {record.get('turns', 0)} turns · stop: "
        f"{escape(str(record.get('stop_reason') or '?'))} · reward "
        f"{f'{total:.4g}' if isinstance(total, int | float) else '?'}"
    )
    parts = [STYLE, '<div class="rlf-traj">']
    if title:
        parts.append(f"<h4>{escape(title)}</h4>")
    parts.append(f'<div class="rlf-meta">{head}</div>')
    messages = record.get("messages") or []
    turns = record.get("turns")
    history = history_turns(messages, turns if isinstance(turns, int) else 0)
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
                if len(v) >= turn and isinstance(v[turn - 1], int | float)
            )
            parts.append(f'<div class="rlf-turn"><b>assistant · turn {turn}</b>')
            if per_turn:
                parts.append(f'<div class="rlf-meta">turn score: {per_turn}</div>')
            parts.append(_pre(content))
            parts.extend(tool_call_html(call) for call in calls_by_turn.get(turn, []))
            parts.append("</div>")
        # `tool` messages are the observations, shown under the call that produced them
    parts.append(rewards_table(record))
    parts.append("</div>")
    return "".join(parts)
