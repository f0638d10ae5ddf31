"""ms-swift's inference engines as the agent loop's policy, for evaluation.

:class:`SwiftPolicy` hands out one :class:`SwiftEpisode` per trajectory, whose prompt is the one training
rollouts see, token for token: docs/eval.md ("An ms-swift inference engine").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from swift.infer_engine import AdapterRequest, InferRequest, RequestConfig, TransformersEngine

from ..rollout.episode import Generation, Messages
from .swift_template import call_format, turn_end_id, with_system_prompt

ENGINES = ("transformers", "vllm")


class SwiftPolicy:
    """A local model behind an ms-swift inference engine.

    Args:
        engine: a ``TransformersEngine`` or ``VllmEngine`` (the latter with ``use_async_engine=True``).
        request_config: sampling settings applied to every turn (``return_details`` is forced on: the
            sampled ids are what goes back into the history).
        max_length: context budget in tokens for :meth:`SwiftEpisode.fits`; default the engine's.
        adapter_request: the LoRA checkpoint every turn is asked of (:meth:`for_adapter`); ``None``: the
            engine's own model, with the one adapter it was loaded with, if any.
    """

    def __init__(
        self,
        engine: Any,
        request_config: RequestConfig,
        max_length: int | None = None,
        adapter_request: AdapterRequest | None = None,
    ):
        self.engine = engine
        self.adapter_request = adapter_request
        self.template = engine.template
        self.tokenizer = self.template.tokenizer
        request_config.return_details = True
        self.request_config = request_config
        self.max_length = max_length or getattr(engine, "max_model_len", None)
        self.max_tokens = request_config.max_tokens or 0
        # The transformers engine answers the requests in flight as batches, sized by their longest prompt:
        # SwiftEpisode._config fits a prompt to this context (--max-length when shorter than the model's,
        # what vLLM is given as its max_model_len); 0 on an engine that sizes each request alone.
        limits = (self.max_length, getattr(engine, "max_model_len", None))
        batched = isinstance(engine, TransformersEngine)
        self.context_limit = min((n for n in limits if n), default=0) if batched else 0
        self.prefix_ids = self._response_prefix_ids()
        self.turn_end_id = turn_end_id(self.tokenizer, self.template)
        self.call_format = call_format(self.template)  # what its tools prompt asks for; refused if unread

    @classmethod
    def load(
        cls,
        model: str,
        *,
        engine: str = "transformers",
        model_type: str | None = None,
        template: str | None = None,
        adapters: str | Sequence[str] | None = None,
        temperature: float = 0.0,
        top_p: float | None = None,
        max_tokens: int = 512,
        max_length: int | None = None,
        concurrency: int = 32,
        seed: int | None = None,
        gpu_memory_utilization: float = 0.9,
        tensor_parallel_size: int = 1,
    ) -> SwiftPolicy:
        """Load ``model`` (a folder or hub id) in ``engine`` with an optional LoRA ``adapters`` folder.

        Several folders make one engine that can serve each of them: the policy itself is the base model,
        and :meth:`for_adapter` gives the policy of one folder (vLLM loads each as a LoRA request, the
        transformers engine as a named PEFT adapter). Scoring checkpoints this way starts the engine once.
        """
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")
        if seed is not None:
            from swift.utils import seed_everything

            seed_everything(seed)
        folders = [adapters] if isinstance(adapters, str) else list(adapters or [])
        lora = folders if len(folders) == 1 else None  # one: the engine's default; several: per request
        if engine == "vllm":
            from swift.infer_engine import VllmEngine

            infer_engine = VllmEngine(
                model,
                model_type=model_type,
                template_type=template,
                adapters=lora,
                enable_lora=bool(folders),
                max_loras=max(1, len(folders)),
                max_lora_rank=max([16, *map(_lora_rank, folders)]),
                use_async_engine=True,
                max_model_len=max_length,
                max_num_seqs=max(concurrency, 1),
                gpu_memory_utilization=gpu_memory_utilization,
                tensor_parallel_size=tensor_parallel_size,
                seed=seed,
            )
        else:
            from swift.infer_engine import TransformersEngine

            # Requests with equal sampling settings are batched; one batch holds every episode in flight.
            # Except per-request adapters: ms-swift 4.6 gives PEFT one adapter name for a whole batch, which
            # PEFT refuses for more than one input ("Length of `adapter_names` should be the same as the
            # number of inputs"), so an engine serving several checkpoints answers one request at a time.
            infer_engine = TransformersEngine(
                model,
                model_type=model_type,
                template_type=template,
                adapters=lora,
                max_batch_size=concurrency if len(folders) < 2 else 1,
                # the CPU runs a model in float32, as training there does: bfloat16 (what most checkpoints
                # say) is emulated on a CPU and several times slower; a GPU keeps the checkpoint's dtype
                torch_dtype=None if torch.cuda.is_available() else torch.float32,
            )
            # A request the template cannot encode (a prompt past max_length: MaxLengthError) fails its own
            # episode, not the batch: strict, ms-swift's default, raises its error to every request of the
            # batch; without it the engine hands that request its exception and answers the others (as
            # ms-swift's own samplers run it).
            infer_engine.strict = False
        config = RequestConfig(max_tokens=max_tokens, temperature=temperature, top_p=top_p)
        return cls(infer_engine, config, max_length=max_length)

    def for_adapter(self, folder: str) -> SwiftPolicy:
        """The same engine answering with the LoRA checkpoint ``folder`` (an engine loaded with several)."""
        return SwiftPolicy(self.engine, self.request_config, self.max_length, AdapterRequest(folder, folder))

    def render_prompt(
        self, messages: Messages, system_prompt: str | None, tools: list[dict] | None
    ) -> Messages:
        """The first prompt of an episode: the row's messages with the system prompt and tools merged in."""
        return with_system_prompt(messages, self.template, system_prompt, tools)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` (exact observation truncation, as in training)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def new_episode(self) -> SwiftEpisode:
        """A fresh per-trajectory generator."""
        return SwiftEpisode(self)

    def _response_prefix_ids(self) -> list[int]:
        # As MultiTurnScheduler.get_response_token_data: the prefix the template puts after the generation
        # prompt (Qwen3's `<think>\n\n</think>\n\n`) belongs to the assistant turn's ids.
        from swift.template import StdTemplateInputs

        prefix = self.template._get_response_prefix(StdTemplateInputs(messages=[], chat_template_kwargs={}))
        return list(self.tokenizer.encode(prefix, add_special_tokens=False)) if prefix else []


class SwiftEpisode:
    """One trajectory's generator: remembers the ids behind each assistant turn it produced.

    Attributes:
        tokens_used: prompt + completion tokens of the latest turn (the context in use), ``None`` before
            the first turn.
    """

    def __init__(self, policy: SwiftPolicy):
        self.policy = policy
        self.tokens_used: int | None = None
        self._ids: dict[str, list[int]] = {}

    async def generate(self, messages: Messages) -> Generation:
        """The next assistant turn of ``messages``."""
        policy = self.policy
        request = InferRequest(messages=[self._as_ids(m) for m in messages])
        response = await policy.engine.infer_async(
            request, self._config(request), adapter_request=policy.adapter_request
        )
        choice = response.choices[0]
        text = choice.message.content or ""
        ids = list(choice.token_ids or [])
        if ids and policy.turn_end_id is not None and ids[-1] == policy.turn_end_id:
            ids = ids[
                :-1
            ]  # the template renders the turn end again before the tool block (see the scheduler)
        self._ids[text] = policy.prefix_ids + ids
        usage = response.usage
        self.tokens_used = usage.prompt_tokens + usage.completion_tokens if usage else None
        return Generation(text=text, finish_reason=choice.finish_reason)

    def _config(self, request: InferRequest) -> RequestConfig:
        """The sampling settings of ``request``: the policy's, unless its prompt leaves less room than
        ``max_tokens`` in the context (the model's length, or a shorter ``max_length``) on the transformers
        engine; then its own ``max_tokens`` (a batch of its own), and with no room its own episode fails. Why:
        docs/eval.md ("An ms-swift inference engine").
        """
        policy, limit = self.policy, self.policy.context_limit
        if not limit:
            return policy.request_config
        prompt = len(policy.template.encode(request)["input_ids"])  # MaxLengthError past the template's
        room = limit - prompt
        if room <= 0:
            raise ValueError(
                f"the prompt is {prompt} tokens, all of the {limit} the context holds: no room to answer"
            )
        if room >= policy.max_tokens:
            return policy.request_config
        return replace(policy.request_config, max_tokens=room)

    def _as_ids(self, message: dict[str, Any]) -> dict[str, Any]:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str) and content in self._ids:
            return {"role": "assistant", "content": list(self._ids[content])}
        return dict(message)


def _lora_rank(adapters: str) -> int:
    """The LoRA rank in ``adapter_config.json`` (vLLM must be told the largest rank it will serve)."""
    config = Path(adapters) / "adapter_config.json"
    try:
        return int(json.loads(config.read_text()).get("r", 0))
    except (OSError, ValueError):
        return 0
