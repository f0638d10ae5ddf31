"""The requests a GRPO step sent to its engine, read back from the run's ``trajectories.jsonl``.

The generation floor (``floor.py``) replays them on a standalone vLLM engine: for every logged step, turn by
turn as ms-swift's colocate driver sends them (every trajectory still going gets its next turn together),
each request the token ids of its conversation so far and exactly as many new tokens as the run wrote for
that turn. The train floor uses each trajectory's whole conversation and where its completion starts.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swift_rlfactory.trajectory import history_turns


@dataclass(frozen=True)
class TurnRequest:
    """One generation request: the conversation so far as token ids, and the tokens the turn produced."""

    prompt_ids: list[int]
    new_tokens: int


def read_steps(path: Path) -> dict[int, list[dict[str, Any]]]:
    """The trajectories of each training step (eval lines, without a step, are left out), in file order."""
    steps: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for line in Path(path).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            if row.get("step") is not None:
                steps[int(row["step"])].append(row)
    return dict(sorted(steps.items()))


def _render(tokenizer: Any, messages: list[dict[str, Any]], generation_prompt: bool) -> list[int]:
    plain = [{"role": m["role"], "content": m.get("content") or ""} for m in messages]
    ids = tokenizer.apply_chat_template(plain, add_generation_prompt=generation_prompt, tokenize=True)
    return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)


def turn_requests(trajectory: dict[str, Any], tokenizer: Any, max_tokens: int) -> list[TurnRequest]:
    """One request per generated assistant turn of ``trajectory`` (a ``trajectories.jsonl`` line).

    The prompt is the chat template's rendering of every message before that turn (the system message
    already holds the tool schemas the scheduler rendered into it); the new tokens are the turn's text
    plus its end-of-turn token, at most ``max_tokens``.
    """
    messages = trajectory["messages"]
    assistant_at = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    generated = assistant_at[history_turns(messages, int(trajectory.get("turns") or 0)) :]
    out = []
    for i in generated:
        text = messages[i].get("content") or ""
        n = len(tokenizer(text, add_special_tokens=False)["input_ids"]) + 1
        out.append(TurnRequest(_render(tokenizer, messages[:i], True), min(n, max_tokens)))
    return out


def turn_batches(
    trajectories: Iterable[dict[str, Any]], tokenizer: Any, max_tokens: int
) -> list[list[TurnRequest]]:
    """A step's requests in the driver's order: batch k holds turn k of every trajectory that reached it."""
    batches: list[list[TurnRequest]] = []
    for trajectory in trajectories:
        for k, request in enumerate(turn_requests(trajectory, tokenizer, max_tokens)):
            if k == len(batches):
                batches.append([])
            batches[k].append(request)
    return batches


def train_sequence(trajectory: dict[str, Any], tokenizer: Any) -> tuple[list[int], int]:
    """The whole conversation as token ids and the length of its prompt (where training's completion starts)."""
    messages = trajectory["messages"]
    assistant_at = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    first = assistant_at[history_turns(messages, int(trajectory.get("turns") or 0))] if assistant_at else None
    ids = _render(tokenizer, messages, False)
    prompt = len(_render(tokenizer, messages[:first], True)) if first is not None else len(ids)
    return ids, prompt
