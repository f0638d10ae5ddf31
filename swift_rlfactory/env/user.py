"""The simulated user of an environment's ``user:``: scripted Python code or a model behind an
OpenAI-compatible endpoint, each reply cached, bounded by ``timeout_s`` and never raised, its reasoning never
said; a model user's reply that only repeats the agent is asked again with a reminder of its role
(``echo_retries``).

When it speaks and how a conversation ends: :mod:`swift_rlfactory.rollout.user`; the YAML and the rules:
docs/environments.md#simulated-users.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from ..redaction import excerpt, redact
from ..rollout.user import Messages, UserReply, UserRule, echoes, user_system_prompt, user_view
from ..runtime import blocking
from ..runtime.calls import UserCode
from ..runtime.chat import ChatClient, ChatError, chat_url
from ..runtime.json_api import content_text
from ..runtime.user_code import import_target
from ..tools.cache import ToolCache
from ..tools.calls import without_reasoning
from ..tools.observation import encodable
from .config import EnvConfigError, UserConfig

logger = logging.getLogger(__name__)

RunOn = Callable[[Coroutine[Any, Any, Any]], Awaitable[Any]]
"""Where a reply is made: the tool executor's loop, which outlives the loops ms-swift makes per batch (the
chat client's connections and the cache's in-flight replies belong to one loop)."""
RETRIES = 2  # attempts after the first, within timeout_s (the chat client's one retry rule)
CONNECTIONS = 128  # the model user's connection pool
MAX_ERROR_CHARS = 500
ECHO_REMINDER = (
    "Your last reply repeated the other side's message word for word. Do not repeat it: you are the user "
    "described above, not the one you talk to. Answer its last message in your own words, as your "
    "instructions and goal say."
)


class UserError(RuntimeError):
    """The user gave no reply (the row has no goal, the endpoint failed, the code returned no text)."""


class SimulatedUser:
    """The environment's simulated user: ``await user.reply(messages, row)`` gives a :class:`UserReply`.

    Args:
        config: the validated ``user:`` block.
        base_dir: the environment's folder (a ``scripted`` file resolves against it).
        cache: the environment's cache, for a model user's replies (``None``: one in memory of its own); a
            scripted user's replies are cached in memory only, since its code may change between runs.
    """

    def __init__(self, config: UserConfig, base_dir: Path, cache: ToolCache | None = None):
        self.config = config
        self.rule = UserRule(config.max_user_turns, config.stop_marker, config.answer_pattern)
        self._run_on: RunOn | None = None
        self._client: ChatClient | None = None
        self._errors = 0
        self._scripted = _load_scripted(config.scripted, base_dir) if config.scripted else None
        self._code = UserCode("user", kind="user", own_loop=True)
        if config.scripted:
            identity: list[Any] = ["scripted", config.scripted]
            cache = None
        else:  # what else shapes the reply; the URL may hold a key, but the cache key is a digest
            identity = ["model", config.base_url, config.model, config.persona, config.stop_marker]
            identity += [config.temperature, config.max_tokens, config.extra_body, config.echo_retries]
        self._identity = json.dumps(identity, sort_keys=True, default=str)
        self.cache = (cache or ToolCache(max_entries=10_000)) if config.cache else None

    def run_on(self, run_on: RunOn) -> None:
        """Make replies through ``run_on`` (the executor's loop) instead of the caller's loop."""
        self._run_on = run_on

    async def reply(self, messages: Messages, row: dict[str, Any]) -> UserReply:
        """The user's next turn after ``messages`` (the agent's side: system, user, assistant, tool), its
        goal ``row[goal_field]``; within ``timeout_s``, or a reply with ``error`` set (never raises)."""
        t0 = time.perf_counter()
        limit = self.config.timeout_s
        try:
            goal = self._goal(row)
            plain = [{"role": m.get("role"), "content": content_text(m.get("content"))} for m in messages]
            work = self._answer(goal, plain)
            text, hit, echoed = await asyncio.wait_for(self._run_on(work) if self._run_on else work, limit)
        except TimeoutError:
            return self._failed(f"no reply within {limit:g} s", t0, timed_out=True)
        except UserError as exc:
            return self._failed(str(exc), t0)
        except Exception as exc:  # the user's code raised: its words, redacted
            return self._failed(excerpt(f"{type(exc).__name__}: {exc}", MAX_ERROR_CHARS), t0)
        return UserReply(text=text, latency_s=time.perf_counter() - t0, cache_hit=hit, echoes=echoed)

    def close(self) -> None:
        """Close the model user's connections (on the loop that made them) and the scripted user's loop;
        idempotent."""
        self._code.close()
        client, self._client = self._client, None
        if client is not None:
            blocking.run(self._run_on(client.aclose()) if self._run_on else client.aclose())

    # -- one reply -------------------------------------------------------------------------------------
    def _goal(self, row: dict[str, Any]) -> Any:
        name = self.config.goal_field
        if row.get(name) is None:
            raise UserError(f"the dataset row has no {name!r} field (user.goal_field): the user has no goal")
        return row[name]

    async def _answer(self, goal: Any, messages: Messages) -> tuple[str, bool, int]:
        """``(reply, cache_hit, echoes)``: from the cache (same goal, same conversation so far; no echo
        counted) or asked now."""
        echoed = 0

        async def ask() -> str:
            nonlocal echoed
            text, echoed = await (
                self._scripted_reply(goal, messages) if self._scripted else self._model_reply(goal, messages)
            )
            return text

        if self.cache is None:
            return await ask(), False, echoed
        canonical = json.dumps(
            [self._identity, goal, messages], sort_keys=True, ensure_ascii=False, default=str
        )
        text, hit = await self.cache.get_or_run("user:" + hashlib.sha256(canonical.encode()).hexdigest(), ask)
        return text, hit, echoed

    async def _scripted_reply(self, goal: Any, messages: Messages) -> tuple[str, int]:
        """The code's reply and whether it only repeats the agent (counted, not asked again: code that
        echoes would echo again)."""
        assert self._scripted is not None
        value = await self._code.call(self._scripted, goal, [dict(m) for m in messages])
        if not isinstance(value, str):
            raise UserError(f"the scripted user returned {type(value).__name__}, not text")
        text = _spoken(value)
        return text, int(self._echoes(text, user_view(messages, "")))

    async def _model_reply(self, goal: Any, messages: Messages) -> tuple[str, int]:
        """The model's reply and how many of its replies only repeated the agent: each such reply is asked
        again, up to ``echo_retries`` times, with :data:`ECHO_REMINDER` after the system prompt; the last
        one is kept whatever it says."""
        config = self.config
        if self._client is None:
            key = config.api_key
            self._client = ChatClient(
                chat_url(config.base_url or ""),
                api_key=None if key is None else key.get_secret_value(),
                timeout_s=config.timeout_s,
                retries=RETRIES,
                connections=CONNECTIONS,
            )
        system = user_system_prompt(config.persona, goal, config.stop_marker)
        view = user_view(messages, system)
        reminded = [{"role": "system", "content": f"{system}\n\n{ECHO_REMINDER}"}, *view[1:]]
        for echoed in range(config.echo_retries + 1):
            text = await self._complete(reminded if echoed else view)
            if not self._echoes(text, view):
                return text, echoed
        return text, config.echo_retries + 1

    async def _complete(self, view: Messages) -> str:
        """One reply of the model user's endpoint to ``view``."""
        config = self.config
        assert self._client is not None
        body = {
            "model": config.model,
            "messages": view,
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
            **config.extra_body,
        }
        try:
            data = await self._client.complete(body)
        except ChatError as exc:
            raise UserError(_chat_failure(exc, config.base_url or "")) from None
        try:
            choice = data["choices"][0]
            content, cut = content_text(choice["message"]["content"]), choice.get("finish_reason") == "length"
        except (KeyError, IndexError, TypeError, AttributeError):
            shown = excerpt(json.dumps(data, ensure_ascii=False, default=str))
            raise UserError(f"not a chat completion: {shown!r}") from None
        return _spoken(content, cut=cut)

    def _echoes(self, text: str, view: Messages) -> bool:
        """Whether ``text`` only repeats the agent's last message in ``view`` (the model user's view)."""
        said = view[-1]["content"] if view[-1]["role"] == "user" else ""
        return echoes(text, said, self.config.stop_marker)

    def _failed(self, error: str, t0: float, timed_out: bool = False) -> UserReply:
        self._errors += 1
        n = self._errors
        # the 1st, 10th, 100th ... failure: a user endpoint that is down must not flood the log
        level = logging.WARNING if str(n).strip("0") == "1" else logging.DEBUG
        logger.log(level, "simulated user (failure %d so far): %s", n, error)
        return UserReply(error=error, latency_s=time.perf_counter() - t0, timed_out=timed_out)


def _spoken(value: str, cut: bool = False) -> str:
    """What the user says in ``value``: its reasoning left out (a thinking model's ``<think>`` block may hold
    its goal or the stop marker, neither of which is said), defused as a tool result is (a ``<|im_end|>``
    written in it would end the user's turn in the agent's prompt). ``cut``: the endpoint stopped at
    ``max_tokens``. Raises :class:`UserError` when nothing is said."""
    text = without_reasoning(value)
    text = text.strip() if text != value else text
    if text.strip():
        return encodable(text)
    if cut:
        raise UserError(
            "the user's reply has no text: max_tokens ran out first (a thinking user needs more, or "
            "extra_body: {chat_template_kwargs: {enable_thinking: false}})"
        )
    raise UserError("the user's reply has no text")


def _chat_failure(exc: ChatError, base_url: str) -> str:
    """Why the endpoint gave no reply, without the key (redacted) or the URL's path and query."""
    if exc.kind in ("not_json", "status") and exc.text:
        return f"{exc} from the user endpoint: {excerpt(exc.text)!r}"
    return f"no reply from {redact(base_url)}: {exc}"


def _load_scripted(ref: str, base_dir: Path) -> Callable[..., Any]:
    """``user.scripted`` resolved like tools and rewards; a class is instantiated once and its ``reply``
    method used. Raises :class:`EnvConfigError` naming the field."""
    target, _, attr = ref.partition(":")
    where = f"user.scripted ({ref!r})"
    if not attr:
        raise EnvConfigError(f"{where}: name a function or class as 'file.py:name' or 'module:name'")
    try:
        found = getattr(import_target(target, base_dir), attr)
        if inspect.isclass(found):
            found = found().reply
    except Exception as exc:
        raise EnvConfigError(f"{where}: {type(exc).__name__}: {exc}") from exc
    if not callable(found):
        raise EnvConfigError(f"{where}: not a function, nor a class with a reply(goal, messages) method")
    return found
