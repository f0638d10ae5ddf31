"""The agent loop, as pure decisions plus one short coroutine.

:func:`plan_turn` decides after each assistant turn (run the calls, hand the turn to a simulated user, or
stop and say why); the ms-swift scheduler, :func:`run_episode` (server mode) and the evaluation CLI share it.
Stop reasons and the order of the decisions: docs/environments.md#the-episode-loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..tools.calls import CallParser, ToolCall, parse_tool_calls
from ..tools.episode_state import NO_EPISODE
from ..tools.executor import ToolExecutor, ToolRecord
from ..trajectory import Trajectory
from .user import USER_STOP, User, UserRule

Messages = list[dict[str, Any]]


@dataclass
class TurnPlan:
    """What to do after an assistant turn: ``calls`` to run, let the user speak (``ask_user``), or
    ``stop_reason`` to finish."""

    calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str | None = None
    ask_user: bool = False

    @property
    def finished(self) -> bool:
        """True when the trajectory ends with this turn."""
        return self.stop_reason is not None


def plan_turn(
    response: str,
    turn: int,
    max_turns: int,
    max_calls_per_turn: int = 8,
    finish_reason: str | None = None,
    parse: CallParser = parse_tool_calls,
    user: UserRule | None = None,
    user_turns: int = 0,
) -> TurnPlan:
    """Decide the next step from the assistant's text. ``turn`` counts from 1.

    ``parse`` reads the calls in the format the prompt asked for (hermes by default). Calls past
    ``max_calls_per_turn`` are kept as error calls of kind ``"limit"``, so the model sees the limit;
    at most ``max_calls_per_turn`` of them are kept, the last one counting the calls dropped after it.
    With a simulated ``user`` (who has spoken ``user_turns`` times so far), a turn without calls that is
    neither a final answer nor empty is the user's to reply to, while turns and user turns are left.
    """
    if finish_reason == "length":  # cut mid-turn: a half-written call must not run
        return TurnPlan(stop_reason="length")
    calls = parse(response)
    if not calls:
        return _without_calls(response, turn, max_turns, user, user_turns)
    if turn >= max_turns:
        return TurnPlan(stop_reason="max_turns")
    refused = calls[max_calls_per_turn : 2 * max_calls_per_turn]
    for extra in refused:
        extra.error = f"too many tool calls in one turn (limit {max_calls_per_turn})"
        extra.error_kind = "limit"
    dropped = len(calls) - 2 * max_calls_per_turn
    if dropped > 0:
        refused[-1].error += f"; the {dropped} calls after this one were not run either, and are not shown"
    return TurnPlan(calls=calls[: 2 * max_calls_per_turn])


def _without_calls(
    response: str, turn: int, max_turns: int, user: UserRule | None, user_turns: int
) -> TurnPlan:
    """A turn without calls: an answer, or (with a user, and neither a final answer nor empty) the user's
    turn."""
    if user is None or user.answered(response):
        return TurnPlan(stop_reason="answer")
    if turn >= max_turns:
        return TurnPlan(stop_reason="max_turns")
    if user_turns >= user.max_user_turns:
        return TurnPlan(stop_reason="max_user_turns")
    return TurnPlan(ask_user=True)


def tool_messages(records: Sequence[ToolRecord]) -> Messages:
    """One ``tool`` message per record, in call order (the chat template groups them for the model)."""
    return [{"role": "tool", "content": record.observation} for record in records]


def record_dicts(records: Sequence[ToolRecord], turn: int) -> list[dict[str, Any]]:
    """Records as plain dicts tagged with their turn, for rollout infos and logs."""
    return [{**record.to_dict(), "turn": turn} for record in records]


@dataclass
class Generation:
    """One assistant turn produced by an engine."""

    text: str
    finish_reason: str | None = None


Generate = Callable[[Messages], Awaitable[Generation]]
Observe = Callable[[Messages, Sequence[ToolRecord]], None]
"""Sees the conversation after each turn's tool messages (the last ``len(records)`` of it) with their
records: a served vision model's episode takes the images from them (the messages keep their text)."""


async def run_episode(
    messages: Messages,
    generate: Generate,
    executor: ToolExecutor,
    max_turns: int,
    max_calls_per_turn: int = 8,
    fits: Callable[[Messages], bool] | None = None,
    row: dict[str, Any] | None = None,
    parse: CallParser = parse_tool_calls,
    state: Any = NO_EPISODE,
    episode: str | None = None,
    user: User | None = None,
    observe: Observe | None = None,
) -> Trajectory:
    """Run one trajectory to the end: generate, call tools (or hear the user), observe, repeat.

    Args:
        messages: the prompt (system prompt and tool schemas already in place).
        generate: produces the next assistant turn for a conversation.
        executor: runs tool calls (awaited without blocking the caller's loop).
        max_turns: assistant turns allowed.
        fits: whether a conversation still fits the context budget; ``None`` means always.
        row: dataset fields carried into the trajectory for rewards.
        parse: reads a turn's calls in the format the prompt asked for (hermes by default).
        state: the episode's state, given to the tools that ask for it and kept on the trajectory.
        episode: the trajectory's id, for tools kept per trajectory (persistent ``run_python``).
        user: the simulated user, who replies to a turn without calls and without a final answer.
        observe: called after each turn's tool messages are appended (:data:`Observe`).
    """
    messages = list(messages)
    calls: list[dict[str, Any]] = []
    heard: list[dict[str, Any]] = []  # the user's replies, as records
    rule = user.rule if user is not None else None
    turn = 0
    error = None
    while True:
        turn += 1
        out = await generate(messages)
        messages.append({"role": "assistant", "content": out.text})
        try:
            plan = plan_turn(
                out.text, turn, max_turns, max_calls_per_turn, out.finish_reason, parse, rule, len(heard)
            )
            if plan.finished:
                stop = plan.stop_reason
                break
            if plan.ask_user and user is not None:
                stop, error = await _hear_user(user, messages, dict(row or {}), turn, heard)
                if stop is not None:
                    break
            else:
                records = await executor.aexecute(plan.calls, state, episode)
                calls.extend(record_dicts(records, turn))
                messages.extend(tool_messages(records))
                if observe is not None:
                    observe(messages, records)
            if fits is not None and not fits(messages):
                stop = "context"
                break
        except Exception as exc:  # one broken step ends this trajectory, not the whole evaluation
            stop, error = "error", f"{type(exc).__name__}: {exc}"
            break
    return Trajectory(
        messages=messages,
        tool_calls=calls,
        turns=turn,
        stop_reason=stop or "",
        row=dict(row or {}),
        error=error,
        state=None if state is NO_EPISODE else state,
        user_calls=heard,
        episode_key=episode,
    )


async def _hear_user(
    user: User, messages: Messages, row: dict[str, Any], turn: int, heard: list[dict[str, Any]]
) -> tuple[str | None, str | None]:
    """Ask the user for its turn and append it to ``messages``; returns ``(stop, error)``: ``user_stop``
    when it said it is done (its message kept), ``error`` when it gave no reply, else ``(None, None)``."""
    reply = await user.reply(messages, row)
    heard.append(reply.to_dict(turn))
    if reply.text is None:
        return "error", f"user: {reply.error}"
    messages.append({"role": "user", "content": reply.text})
    return (USER_STOP, None) if user.rule.stops(reply.text) else (None, None)
