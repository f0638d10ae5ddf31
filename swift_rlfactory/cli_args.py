"""Argument types and flag groups shared by the subcommands: the model flags of ``eval`` and ``serve-agent``."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1 (``--limit 0`` or ``--repeat -3`` would do nothing)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def number(text: str) -> float:
    """An argparse type: a finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number above 0."""
    if (value := number(text)) <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number of at least 0."""
    if (value := number(text)) < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {text}")
    return value


def fraction(text: str) -> float:
    """An argparse type: a number in (0, 1]."""
    if not 0 < (value := number(text)) <= 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1, got {text}")
    return value


def add_model_arguments(parser: argparse.ArgumentParser, adapters: dict[str, Any]) -> None:
    """The two ways to name the policy: a local model (ms-swift engine) or a served one (an
    OpenAI-compatible endpoint); ``adapters``: the ``--adapters`` flag's argparse settings."""
    local = parser.add_argument_group("a local model (ms-swift inference engine)")
    local.add_argument("--model", help="a model folder, a hub id, or a bundled name (as `train` takes)")
    local.add_argument("--adapters", metavar="FOLDER", **adapters)
    local.add_argument("--model-type", help="ms-swift --model_type")
    local.add_argument("--template", help="ms-swift --template (with --base-url: its system-prompt rules)")
    local.add_argument("--engine", choices=["transformers", "vllm"], help="default: vllm if torch sees a GPU")
    local.add_argument("--max-length", type=positive, help="context budget in tokens (default: the model's)")
    local.add_argument("--gpu-memory-utilization", type=fraction, default=0.9, help="vLLM (default 0.9)")
    local.add_argument("--tensor-parallel-size", type=positive, default=1, help="vLLM (default 1)")
    local.add_argument("--seed", type=int, default=0, help="seeds local sampling (default 0)")
    served = parser.add_argument_group("a served model (OpenAI-compatible chat endpoint)")
    served.add_argument("--base-url", help="API root, e.g. http://host:8000/v1")
    served.add_argument("--served-model", help="the model name the server knows")
    served.add_argument("--api-key", help="bearer token (default $OPENAI_API_KEY)")
    served.add_argument("--tokenizer", help="tokenizer folder for exact observation truncation")
    served.add_argument("--stop", action="append", help="extra stop string (repeatable; none by default)")
    served.add_argument("--extra-body", help="JSON merged into each request, e.g. '{\"top_k\": 20}'")
    served.add_argument(
        "--vision",
        nargs="?",
        const="tool",
        choices=["tool", "user"],
        help="the served model takes images: each image a tool returns is sent as an image part, in the "
        "tool message (the default) or in a user message after it ('user': for APIs that take images "
        "from users only, as OpenAI's); without it the model reads a note of the image's type and size",
    )
    served.add_argument(
        "--timeout",
        type=positive_float,
        default=600.0,
        help="seconds each request attempt may take, the whole answer included (default 600)",
    )


def add_turn_arguments(group: argparse._ArgumentGroup, temperature_help: str) -> None:
    """Sampling of each turn and the turns of an episode."""
    group.add_argument("--temperature", type=non_negative_float, help=temperature_help)
    group.add_argument("--top-p", type=fraction, help="nucleus sampling (default: the model's)")
    group.add_argument(
        "--max-tokens", type=positive, default=512, help="tokens per assistant turn (default 512)"
    )
    group.add_argument("--max-turns", type=positive, help="turns per episode (default and cap: the env's)")


def policy_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``PolicyOptions`` fields the flags of :func:`add_model_arguments` and :func:`add_turn_arguments`
    (and ``--concurrency``) give, ``--adapters`` left to the caller. Raises ``ValueError`` for an
    ``--extra-body`` that is not JSON."""
    try:
        extra_body = json.loads(args.extra_body) if args.extra_body else None
    except json.JSONDecodeError as exc:
        raise ValueError(f"--extra-body is not valid JSON: {exc}") from None
    return dict(
        model=args.model,
        model_type=args.model_type,
        template=args.template,
        engine=args.engine,
        base_url=args.base_url,
        served_model=args.served_model,
        api_key=args.api_key,
        tokenizer=args.tokenizer,
        timeout_s=args.timeout,
        vision=args.vision,
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        max_turns=args.max_turns,
        max_length=args.max_length,
        concurrency=args.concurrency,
        seed=args.seed,
        stop=args.stop or [],
        extra_body=extra_body,
        gpu_memory_utilization=args.gpu_memory_utilization,
        tensor_parallel_size=args.tensor_parallel_size,
    )
