"""A model behind an OpenAI-compatible chat endpoint (``swift deploy``, ``vllm serve``, SGLang, ...).

Each turn is ``POST {base_url}/chat/completions`` with the conversation so far. What is sent matters for
evaluating what was trained:

* **Tools go into the system message, not the ``tools`` field.** The schemas are rendered by the same
  :func:`~swift_rlfactory.adapters.swift_template.set_system_prompt` the training scheduler uses, with
  the agent template of ``template`` (hermes by default), so the system text is the trained one whatever
  the server's own tool rendering. Without ``tools`` in the request a server's tool-call parser stays
  off, and ``<tool_call>`` blocks come back as plain text for our parser, as in training.
* **No stop strings by default.** The server's chat template ends each turn at the model's end-of-turn
  token (``<|im_end|>`` for Qwen) and returns ``finish_reason: "stop"``; cutting at ``</tool_call>``
  would lose the second call of a multi-call turn, and parsing handles whatever the turn holds. A
  turn cut by ``max_tokens`` comes back as ``"length"``, which ends the episode as in training.
  An end token left in the text (servers that keep special tokens) is removed.
* Observations are sent as ``{"role": "tool"}`` messages; the server's chat template wraps them
  (``<tool_response>`` for Qwen), as ms-swift's does.

The rest of the prompt (role markers, the generation prompt, how earlier turns are re-rendered) is the
server's chat template; serve with ``swift deploy --template T`` to get ms-swift's own rendering, and pass
``extra_body={"chat_template_kwargs": {"enable_thinking": False}}`` for Qwen3 on vLLM/SGLang to match
``--template qwen3``'s empty think block.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import httpx

from ..adapters.swift_template import TURN_END, template_by_name, with_system_prompt
from ..rollout.episode import Generation, Messages

# Responses worth asking again: rate limits and server-side trouble.
_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
_END_TOKENS = (TURN_END, "<|endoftext|>", "<|eot_id|>", "</s>")


class OpenAIChatPolicy:
    """An OpenAI-compatible chat endpoint as the agent loop's policy.

    Args:
        base_url: the API root, e.g. ``http://host:8000/v1`` (``/chat/completions`` is appended).
        model: the served model name.
        api_key: sent as a bearer token; default ``$OPENAI_API_KEY``, else none.
        template: ms-swift template whose system-prompt rules apply (e.g. ``qwen2_5`` adds its default
            system prompt when the environment has none); ``None``: hermes tools, no default.
        temperature, top_p, max_tokens: sampling per turn.
        max_length: context budget for ending episodes with ``context`` (``None``: no check).
        stop: extra stop strings (none by default, see the module docstring).
        extra_body: merged into every request body (``chat_template_kwargs``, ``top_k``, ``seed``, ...).
        count_tokens: exact token counter for observations (a tokenizer); else about 3 characters a token.
        timeout_s: per request. retries: attempts after a transport error or a retryable status.
        concurrency: connection pool size.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        template: str | None = None,
        temperature: float = 0.0,
        top_p: float | None = None,
        max_tokens: int = 512,
        max_length: int | None = None,
        stop: Sequence[str] = (),
        extra_body: dict[str, Any] | None = None,
        count_tokens: Any = None,
        timeout_s: float = 600.0,
        retries: int = 3,
        concurrency: int = 32,
    ):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.template = template_by_name(template)
        self.max_tokens = max_tokens
        self.max_length = max_length
        self.body: dict[str, Any] = {"model": model, "temperature": temperature, "max_tokens": max_tokens}
        if top_p is not None:
            self.body["top_p"] = top_p
        if stop:
            self.body["stop"] = list(stop)
        self.body.update(extra_body or {})
        self.count_tokens = count_tokens
        self.timeout_s = timeout_s
        self.retries = retries
        self.concurrency = concurrency
        self._client: httpx.AsyncClient | None = None

    def render_prompt(
        self, messages: Messages, system_prompt: str | None, tools: list[dict] | None
    ) -> Messages:
        """The first prompt of an episode: the row's messages with the system prompt and tools merged in."""
        return with_system_prompt(messages, self.template, system_prompt, tools)

    def new_episode(self) -> OpenAIEpisode:
        """A fresh per-trajectory generator."""
        return OpenAIEpisode(self)

    async def complete(self, messages: Messages) -> dict[str, Any]:
        """One chat completion, retried on transport errors, 429 and 5xx; other errors raise."""
        if self._client is None:  # created on the running loop, which owns its connections
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            limits = httpx.Limits(
                max_connections=self.concurrency, max_keepalive_connections=self.concurrency
            )
            self._client = httpx.AsyncClient(headers=headers, timeout=self.timeout_s, limits=limits)
        body = {
            **self.body,
            "messages": [{"role": m["role"], "content": m.get("content") or ""} for m in messages],
        }
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = await self._client.post(self.url, json=body)
            except httpx.TransportError:
                if last:
                    raise
            else:
                if response.status_code < 400:
                    return response.json()
                if response.status_code not in _RETRY_STATUS or last:
                    raise RuntimeError(f"{self.url} answered {response.status_code}: {response.text[:500]}")
            await asyncio.sleep(min(2.0**attempt, 30.0))
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None


class OpenAIEpisode:
    """One trajectory's generator over the endpoint.

    Attributes:
        tokens_used: prompt + completion tokens of the latest turn, from the response's ``usage``.
    """

    def __init__(self, policy: OpenAIChatPolicy):
        self.policy = policy
        self.tokens_used: int | None = None

    async def generate(self, messages: Messages) -> Generation:
        """The next assistant turn of ``messages``."""
        data = await self.policy.complete(messages)
        choice = data["choices"][0]
        text = (choice.get("message") or {}).get("content") or ""
        for token in _END_TOKENS:
            if text.endswith(token):
                text = text[: -len(token)]
        usage = data.get("usage") or {}
        if "prompt_tokens" in usage:
            self.tokens_used = usage["prompt_tokens"] + usage.get("completion_tokens", 0)
        return Generation(text=text, finish_reason=choice.get("finish_reason"))
