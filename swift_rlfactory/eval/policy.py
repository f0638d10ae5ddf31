"""The policy an agent loop runs: a local model (ms-swift engines) or an OpenAI-compatible endpoint.

:class:`PolicyOptions` are the settings ``eval`` and ``serve-agent`` share; :func:`load_policy` makes the
policy they describe (docs/eval.md, "Policies").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape

from swift_rlfactory.bundled.models import ModelChoice


@dataclass(kw_only=True)
class PolicyOptions:
    """Which model answers and how it samples; see ``swift-rlfactory eval --help``."""

    model: str | None = None
    adapters: str | None = None
    model_type: str | None = None
    template: str | None = None
    engine: str | None = None  # None: vllm when torch sees a GPU, else transformers
    base_url: str | None = None
    served_model: str | None = None
    api_key: str | None = None
    tokenizer: str | None = None
    timeout_s: float = 600.0  # seconds one request attempt to --base-url may take
    vision: str | None = None  # where a served model is sent images from tools (tool, user); None: notes
    temperature: float | None = None  # None: greedy (eval: 1.0 for several samples)
    top_p: float | None = None
    max_tokens: int = 512
    max_turns: int | None = None  # None: the environment's; never more than it
    max_length: int | None = None
    concurrency: int = 16
    seed: int | None = 0
    stop: list[str] = field(default_factory=list)
    extra_body: dict[str, Any] | None = None
    gpu_memory_utilization: float = 0.9
    tensor_parallel_size: int = 1

    def validate(self) -> None:
        """Raise ``ValueError`` for contradictory or missing options; an unset temperature becomes 0."""
        if (self.model is None) == (self.base_url is None):
            raise ValueError("give exactly one of --model (a local model) or --base-url (a served one)")
        if self.base_url and not self.served_model:
            raise ValueError("--base-url needs --served-model (the name the server knows the model by)")
        if self.base_url and (self.adapters or self.engine):
            raise ValueError("--adapters and --engine apply to a local --model only")
        if self.vision and not self.base_url:
            raise ValueError("--vision applies to a served model (--base-url) only")
        if self.concurrency < 1 or self.max_tokens < 1:
            raise ValueError("--concurrency and --max-tokens must be at least 1")
        if self.temperature is None:
            self.temperature = 0.0


def load_policy(
    options: PolicyOptions, model: ModelChoice | None, console: Console, adapters: list[str] | None = None
) -> Any:
    """The policy ``options`` describe: an :class:`~.openai_client.OpenAIChatPolicy` for ``base_url``, else
    ``model`` (``choose_model(options.model)``) in an ms-swift engine, with ``adapters`` (several LoRA
    folders for one engine) or ``options.adapters``; ``console`` shows the model's download."""
    if options.base_url:
        from .openai_client import OpenAIChatPolicy

        count_tokens = None
        if options.tokenizer:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(options.tokenizer)
            count_tokens = lambda text: len(tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
        return OpenAIChatPolicy(
            options.base_url,
            options.served_model,
            api_key=options.api_key,
            template=options.template,
            temperature=options.temperature,
            top_p=options.top_p,
            max_tokens=options.max_tokens,
            max_length=options.max_length,
            stop=options.stop,
            extra_body=options.extra_body,
            count_tokens=count_tokens,
            timeout_s=options.timeout_s,
            concurrency=options.concurrency,
            vision=options.vision,
        )
    from ..adapters.swift_infer import SwiftPolicy

    engine = options.engine
    if engine is None:
        import torch

        engine = "vllm" if torch.cuda.is_available() else "transformers"
    assert model is not None  # validate(): a local --model or a --base-url
    return SwiftPolicy.load(
        model.fetch(say=lambda msg: console.print(f"[dim]{escape(msg)}", soft_wrap=True)),
        engine=engine,
        model_type=options.model_type or model.model_type,
        template=options.template or model.template,
        adapters=adapters or options.adapters,
        temperature=options.temperature,
        top_p=options.top_p,
        max_tokens=options.max_tokens,
        max_length=options.max_length,
        concurrency=options.concurrency,
        seed=options.seed,
        gpu_memory_utilization=options.gpu_memory_utilization,
        tensor_parallel_size=options.tensor_parallel_size,
    )
