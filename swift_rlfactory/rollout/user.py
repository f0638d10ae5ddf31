"""What the agent loop knows of a simulated user: when it speaks (:class:`UserRule`), what one reply was
(:class:`UserReply`), the conversation as a model user sees it (:func:`user_view`) and a reply that only repeats
the agent (:func:`echoes`), all pure.

The user itself (scripted code or a model endpoint, cached and under a deadline) is
:class:`swift_rlfactory.env.user.SimulatedUser`; the rules: docs/environments.md#simulated-users.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ..runtime.json_api import content_text
from ..tools.calls import read_reply

Messages = list[dict[str, Any]]

USER_STOP = "user_stop"
"""The stop reason of a conversation the simulated user ended with its stop marker."""
ECHO_MIN_WORDS = 4
"""A message shorter than this is no echo when repeated ("yes", "thank you" may come from either side)."""


@dataclass(frozen=True)
class UserRule:
    """When a simulated user speaks and when it ends the conversation (the environment's ``user:``)."""

    max_user_turns: int = 8
    stop_marker: str = "###STOP###"
    answer_pattern: str = "<answer>"

    def answered(self, text: str) -> bool:
        """Whether an assistant turn ends the conversation: its visible reply (reasoning and calls removed,
        as rewards read it) matches ``answer_pattern`` (a final answer), or is empty (nothing said, so
        nothing for the user to answer: a model user would be asked to follow its own turn)."""
        visible = read_reply(text).visible
        return not visible.strip() or re.search(self.answer_pattern, visible) is not None

    def stops(self, reply: str) -> bool:
        """Whether the user's reply ends the conversation (it holds the stop marker)."""
        return self.stop_marker in reply


@dataclass
class UserReply:
    """One user turn asked for: its ``text``, or ``error`` saying why there is none (``timed_out`` when the
    deadline passed); ``latency_s`` as the caller waited, ``cache_hit`` when a cached reply was reused,
    ``echoes`` the replies that only repeated the agent's message (:func:`echoes`), the one kept included."""

    text: str | None = None
    error: str | None = None
    latency_s: float = 0.0
    cache_hit: bool = False
    timed_out: bool = False
    echoes: int = 0

    def to_dict(self, turn: int) -> dict[str, Any]:
        """A plain record of the call (its text is in the conversation), tagged with the assistant ``turn``
        it answers: one item of ``Trajectory.user_calls``."""
        record = asdict(self)
        del record["text"]
        return {**record, "turn": turn}


class User(Protocol):
    """A simulated user as the agent loop uses it."""

    rule: UserRule

    async def reply(self, messages: Messages, row: dict[str, Any]) -> UserReply:
        """The user's next turn after ``messages`` (the agent's side), its hidden goal read from ``row``;
        never raises: a failure is a reply with ``error`` set."""
        ...


def goal_text(goal: Any) -> str:
    """A goal as text: a string as it is, anything else (a dict of facts) as JSON."""
    return goal if isinstance(goal, str) else json.dumps(goal, ensure_ascii=False, sort_keys=True)


def user_system_prompt(persona: str, goal: Any, stop_marker: str) -> str:
    """The model user's system prompt: the persona, the hidden goal, and how to end the conversation."""
    parts = [persona.strip()] if persona.strip() else []
    parts.append(f"Your goal (the assistant does not know it):\n{goal_text(goal)}")
    parts.append(f"When your goal is met, or cannot be met, end your message with {stop_marker}")
    return "\n\n".join(parts)


def user_view(messages: Messages, system_prompt: str) -> Messages:
    """The conversation as the model user sees it: its system prompt, then the agent's replies as ``user``
    and its own earlier turns as ``assistant``; the agent's system prompt, tool turns, reasoning and tool
    calls are left out, turns left empty dropped and neighbours of one role joined (chat templates that
    require alternating roles accept it)."""
    view: Messages = [{"role": "system", "content": system_prompt}]
    for message in messages:
        role, text = message.get("role"), content_text(message.get("content"))
        if role == "assistant":
            role, text = "user", read_reply(text).visible.strip()
        elif role == "user":
            role, text = "assistant", text.strip()
        else:
            continue
        if not text:
            continue
        if view[-1]["role"] == role:
            view[-1] = {"role": role, "content": f"{view[-1]['content']}\n\n{text}"}
        else:
            view.append({"role": role, "content": text})
    return view


def echoes(reply: str, said: str, stop_marker: str = "") -> bool:
    """Whether a user's ``reply`` only repeats ``said``, the agent's message it answers (a small model user
    may copy the other side's turn instead of playing its own): the same words once case, spacing,
    punctuation and the stop marker are set aside, ``said`` being at least :data:`ECHO_MIN_WORDS` words."""
    words = _words(said)
    if len(words) < ECHO_MIN_WORDS:
        return False
    return _words(reply.replace(stop_marker, " ") if stop_marker else reply) == words


def _words(text: str) -> list[str]:
    return [w for w in (w.strip(string.punctuation) for w in text.casefold().split()) if w]
