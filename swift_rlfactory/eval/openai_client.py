"""A model behind an OpenAI-compatible chat endpoint (``swift deploy``, ``vllm serve``, SGLang, ...).

What is sent each turn (tools in the system message, no stop strings, observations as tool messages, images
from tools for a vision model), how answers are read and requests retried: docs/eval.md ("A model behind an
OpenAI-compatible endpoint").
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import httpx

from swift_rlfactory import redaction
from swift_rlfactory.runtime.chat import ChatClient, ChatError, chat_url
from swift_rlfactory.runtime.json_api import content_text, sendable

from ..adapters import swift_template
from ..adapters.swift_template import TURN_END, TemplateByName, with_system_prompt
from ..rollout.episode import Generation, Messages
from ..rollout.images import ImageBudget, show_images
from ..tools.calls import QWEN3_CODER
from ..tools.executor import ToolRecord

_END_TOKENS = (TURN_END, "<|endoftext|>", "<|eot_id|>", "</s>")
CHECK_TIMEOUT_S = 10.0
"""Longest wait for the start-up check's answer (:meth:`OpenAIChatPolicy.check_served`; less with a shorter
``timeout_s``)."""
VISION_PLACES = ("tool", "user")
"""Where a vision model is sent a tool's images: in the tool message, or in a user message after the turn's
tool messages (for APIs that take images from users only)."""


class OpenAIChatPolicy:
    """An OpenAI-compatible chat endpoint as the agent loop's policy.

    Args:
        base_url: the API root, e.g. ``http://host:8000/v1`` (``/chat/completions`` is appended).
        model: the served model name.
        api_key: sent as a bearer token; default ``$OPENAI_API_KEY``, else none.
        template: ms-swift template whose system-prompt rules apply (e.g. ``qwen2_5`` adds its default
            system prompt when the environment has none) and whose agent template's call format the
            replies are parsed in (``qwen3_5``: Qwen3.5's XML calls); ``None``: hermes tools, no default.
        temperature, top_p, max_tokens: sampling per turn.
        max_length: context budget for ending episodes with ``context`` (``None``: no check).
        stop: extra stop strings (none by default; docs/eval.md says why).
        extra_body: merged into every request body (``chat_template_kwargs``, ``top_k``, ``seed``, ...).
        count_tokens: exact token counter for observations (a tokenizer); else about 3 characters a token.
        timeout_s: seconds one request attempt may take, the whole answer included.
        retries: attempts after a transport error or a retryable status.
        concurrency: connection pool size.
        vision: where the model is sent the images tools return (:data:`VISION_PLACES`); ``None``: it reads
            each image's note, as a text-only model does.
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
        vision: str | None = None,
    ):
        if vision is not None and vision not in VISION_PLACES:
            raise ValueError(f"vision {vision!r}: use one of {', '.join(VISION_PLACES)}")
        self.base_url = base_url
        self.url = chat_url(base_url)
        self.models_url = chat_url(base_url, "models")
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if self.api_key:
            redaction.remember(self.api_key, "<api key>")
        redaction.remember_url(self.url, "<base_url credential>")
        self.template_type = template
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
        self.vision = vision
        self._client: ChatClient | None = None

    @cached_property
    def template(self) -> TemplateByName:
        """The system-prompt rules of :attr:`template_type`, loaded on first use: ms-swift's templates take
        seconds to import, so :meth:`check_served` asks the endpoint before it loads them."""
        return swift_template.template_by_name(self.template_type)

    @cached_property
    def call_format(self) -> str:
        """The call format of the template's agent template: calls come back structured and are written back
        in it."""
        return swift_template.call_format(self.template, swift_reader=False)

    def render_prompt(
        self, messages: Messages, system_prompt: str | None, tools: list[dict] | None
    ) -> Messages:
        """The first prompt of an episode: the row's messages with the system prompt and tools merged in."""
        return with_system_prompt(messages, self.template, system_prompt, tools)

    def new_episode(self) -> OpenAIEpisode:
        """A fresh per-trajectory generator (one that is sent images, for a vision model)."""
        return OpenAIEpisode(self) if self.vision is None else VisionEpisode(self)

    async def complete(self, messages: Messages) -> dict[str, Any]:
        """One chat completion by the chat client's retry rule; a failure raises naming the endpoint."""
        if self._client is None:  # created on the running loop, which owns its connections
            self._client = ChatClient(
                self.url,
                api_key=self.api_key,
                timeout_s=self.timeout_s,
                retries=self.retries,
                connections=self.concurrency,
            )
        body = {
            **self.body,
            "messages": [{"role": m["role"], "content": sendable(m.get("content") or "")} for m in messages],
        }
        try:
            return await self._client.complete(body)
        except ChatError as exc:
            where = redaction.redact(self.url)
            if exc.kind == "transport":
                cause = f"no answer within {self.timeout_s:g} s" if exc.timed_out else str(exc)
                raise RuntimeError(f"{where}: {cause} ({exc.attempts} attempts)") from None
            if exc.kind == "not_json":
                raise RuntimeError(f"{where} answered no JSON: {_start(exc.text)}") from None
            if exc.kind == "status":
                raise RuntimeError(f"{where} answered {exc.status}: {_start(exc.text)}") from None
            raise RuntimeError(f"{where}: {exc}") from None

    def check_served(self) -> None:
        """The start-up check: ask the endpoint, once and briefly, whether it answers and serves :attr:`model`
        (``GET /models``, or where a server offers no list (404, 405), a chat completion of one token), then
        load the template's rules. Asked first, a wrong URL, model name or key fails in about a second, not
        after ms-swift's templates have loaded. Raises ``ValueError``, one line naming ``--base-url``,
        ``--served-model`` or the template and what went wrong, never the key."""
        self._ask_endpoint()
        _ = self.call_format  # an unknown template fails here too, not at the first episode

    def _ask_endpoint(self) -> None:
        where = f"--base-url {redaction.redact(self.base_url)}"
        timeout_s = min(self.timeout_s, CHECK_TIMEOUT_S)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            with httpx.Client(headers=headers, timeout=timeout_s) as client:
                listed = client.get(self.models_url)
                if listed.status_code in (404, 405):
                    probe = {**self.body, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
                    asked = client.post(self.url, json=probe)
        except httpx.TimeoutException:
            raise ValueError(f"{where}: no answer within {timeout_s:g} s (is the server up?)") from None
        except httpx.HTTPError as exc:
            raise ValueError(f"{where}: cannot reach it ({type(exc).__name__}: {exc})") from None
        if listed.status_code in (404, 405):  # no list of models: the chat answer says whether it serves it
            if asked.status_code >= 300:
                raise ValueError(
                    f"{where} refused a chat request for --served-model {self.model}: {asked.status_code} "
                    f"{_line(asked.text)}"
                )
            return
        if listed.status_code >= 300:
            hint = " (the key: --api-key or $OPENAI_API_KEY)" if listed.status_code in (401, 403) else ""
            raise ValueError(
                f"{where} answered {listed.status_code} to GET /models{hint}: {_line(listed.text)}"
            )
        served = _model_ids(listed)
        if served is not None and self.model not in served:
            shown = ", ".join(served[:10]) + (", ..." if len(served) > 10 else "") if served else "none"
            raise ValueError(f"--served-model {self.model}: {where} does not serve it (it serves: {shown})")

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

    def sent(self, messages: Messages) -> Messages:
        """The messages as the endpoint is sent them: as they are."""
        return messages

    async def generate(self, messages: Messages) -> Generation:
        """The next assistant turn of ``messages``."""
        data = await self.policy.complete(self.sent(messages))
        choices = data.get("choices") if isinstance(data, dict) else None
        message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            shown = _start(json.dumps(data, ensure_ascii=False))
            raise RuntimeError(f"{redaction.redact(self.policy.url)}: not a chat completion: {shown}")
        text = content_text(message.get("content"))
        for token in _END_TOKENS:
            if text.endswith(token):
                text = text[: -len(token)]
        text += "".join(_written(call, self.policy.call_format) for call in message.get("tool_calls") or [])
        usage = data.get("usage") or {}
        if isinstance(usage.get("prompt_tokens"), int):
            self.tokens_used = usage["prompt_tokens"] + (usage.get("completion_tokens") or 0)
        return Generation(text=sendable(text), finish_reason=choices[0].get("finish_reason"))


class VisionEpisode(OpenAIEpisode):
    """One trajectory's generator for a vision model: each image a tool returns is sent as an image part
    (a ``data:`` URI) where its note was, in the tool message or, with ``vision="user"``, in a user message
    after the turn's tool messages; the trajectory's messages keep the notes."""

    def __init__(self, policy: OpenAIChatPolicy):
        super().__init__(policy)
        self.instead: dict[int, Any] = {}  # position in the conversation -> the content sent for it
        self.after: dict[int, dict[str, Any]] = {}  # position -> the user message sent after it

    def show_images(self, budget: ImageBudget, messages: Messages, records: Sequence[ToolRecord]) -> None:
        """Take the images of this turn's ``records`` (the last ``len(records)`` of ``messages``), within
        the trajectory's ``budget``, for the requests to come (:data:`~..rollout.episode.Observe`)."""
        start = len(messages) - len(records)
        copies = [dict(m) for m in messages[start:]]
        tag = f"<image {uuid.uuid4().hex}>"  # no tool's text can hold it: the text is split on it
        images = iter(show_images(copies, records, budget, tag))
        shown: list[dict[str, Any]] = []
        for at, copy in enumerate(copies, start):
            if copy["content"] == messages[at]["content"]:
                continue  # no image, or none whose note is in the observation
            first, *rest = copy["content"].split(tag)
            parts, text = [_text_part(first)], first
            for piece in rest:
                image = next(images)
                shown.append(_image_part(image.data_uri))
                parts += [shown[-1], _text_part(piece)]
                text += image.note + piece
            if self.policy.vision == "tool" and rest:
                self.instead[at] = [part for part in parts if part is not None]
            else:  # the text: its notes (user: the images follow), and why an image is not shown
                self.instead[at] = text
        if shown and self.policy.vision == "user":
            self.after[len(messages) - 1] = {"role": "user", "content": shown}

    def sent(self, messages: Messages) -> Messages:
        """The messages with the images taken so far in their places."""
        out: Messages = []
        for at, message in enumerate(messages):
            out.append({**message, "content": self.instead[at]} if at in self.instead else message)
            if at in self.after:
                out.append(self.after[at])
        return out


def _text_part(text: str) -> dict[str, Any] | None:
    return {"type": "text", "text": text} if text else None


def _image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def _model_ids(response: httpx.Response) -> list[str] | None:
    """The model ids of a ``GET /models`` answer (``{"data": [{"id": ...}, ...]}``), ``None`` if unreadable."""
    try:
        data = response.json().get("data")
    except (ValueError, AttributeError):
        return None
    if not isinstance(data, list):
        return None
    return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]


def _line(text: str) -> str:
    """The start of a response body on one line, secrets redacted."""
    return " ".join(_start(text).split())


def _start(text: str) -> str:
    """The start of a response body for an error message, secrets redacted."""
    return redaction.excerpt(text, 300)  # redacted whole, then cut: a cut can split a key past redaction


def _written(call: Any, call_format: str) -> str:
    """One OpenAI ``tool_calls`` entry as the model would have written it in ``call_format``: Qwen3.5's XML
    when its arguments are a JSON object, else the hermes block (which an XML parser reports as an error
    call, never as an answer)."""
    function = call.get("function") if isinstance(call, dict) else None
    if call_format != QWEN3_CODER or not isinstance(function, dict):
        return _hermes(call)
    arguments = function.get("arguments")
    try:
        arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return _hermes(call)
    if not isinstance(arguments, dict) or not isinstance(function.get("name"), str):
        return _hermes(call)
    params = "".join(
        f"<parameter={key}>\n{value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}\n"
        "</parameter>\n"
        for key, value in arguments.items()
    )
    return f"\n<tool_call>\n<function={function['name']}>\n{params}</function>\n</tool_call>"


def _hermes(call: Any) -> str:
    """One OpenAI ``tool_calls`` entry as the hermes block our parser reads, arguments as sent."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return ""
    # OpenAI sends arguments as a JSON string, which the parser reads as such (and says what is wrong with it)
    block = json.dumps(
        {"name": function.get("name"), "arguments": function.get("arguments")}, ensure_ascii=False
    )
    return f"\n<tool_call>\n{block}\n</tool_call>"
