"""Token-level proof that tool observations never carry loss, with the real Qwen3 tokenizer.

A two-turn trajectory (call ``add`` and ``convert``, then answer) is driven through ms-swift's own
multi-turn driver (``run_multi_turn``) with our scheduler, then encoded exactly as the GRPO trainer encodes
a sample (``replace_assistant_response_with_ids`` + ``template.encode``). The tools really run: the
observations in the encoded sequence come from the Python tool and the MCP server. The model's text is
scripted here because the subject is the mask, not the model.
"""

from __future__ import annotations

import asyncio

import pytest
from swift.infer_engine.protocol import (
    RequestConfig,
    RolloutInferRequest,
)
from swift.model import get_processor
from swift.rlhf_trainers.utils import get_response_prefix_ids, replace_assistant_response_with_ids
from swift.rollout.agent_loop import run_multi_turn
from swift.template import get_template

from swift_rlfactory.adapters.swift import RLFactoryScheduler

from .conftest import AGENT_ENV
from .faults.driver import scripted_output

CALLS = (
    '<tool_call>\n{"name": "add", "arguments": {"a": 4000, "b": 242}}\n</tool_call>\n'
    '<tool_call>\n{"name": "convert", "arguments": {"value": 3, "from_unit": "km", "to_unit": "m"}}\n</tool_call>'
)
ANSWER = "<answer>4242</answer>"


@pytest.mark.parametrize("model_type, template_type", [("qwen3", "qwen3"), ("qwen2", "qwen2_5")])
def test_observations_are_masked_and_assistant_tokens_are_trained(
    agent_model, monkeypatch, model_type, template_type
):
    monkeypatch.setenv("RLFACTORY_ENV", str(AGENT_ENV))
    processor = get_processor(str(agent_model), model_type=model_type, check_model=False)
    template = get_template(processor, template_type=template_type, max_length=4096)
    template.set_mode("train")
    tokenizer = template.tokenizer
    scheduler = RLFactoryScheduler(max_turns=3, tokenizer=tokenizer, template=template)
    prefix_ids = get_response_prefix_ids(template)
    prefix = tokenizer.decode(prefix_ids) if prefix_ids else ""

    request = RolloutInferRequest(messages=[{"role": "user", "content": "What is 4000 + 242?"}], uuid="t-1")
    asyncio.run(scheduler.on_trajectory_start([request]))
    replies = iter([ANSWER])
    [out] = run_multi_turn(
        [request],
        [scripted_output(tokenizer, prefix, CALLS)],
        scheduler,
        lambda reqs, cfg: [scripted_output(tokenizer, prefix, next(replies)) for _ in reqs],
        RequestConfig(),
        max_turns=3,
    )

    info = out.rollout_infos["rlfactory"]
    assert [(c["tool"], c["observation"]) for c in info["tool_calls"]] == [
        ("add", "4242"),
        ("convert", "3000.0"),
    ]
    assert info["stop_reason"] == "answer" and out.rollout_infos["num_turns"] == 2

    messages = replace_assistant_response_with_ids(
        [m.copy() for m in out.messages],
        out.response_token_ids,
        out.response_loss_mask,
        non_thinking_prefix_ids=prefix_ids,
    )
    encoded = template.encode({"messages": messages})
    ids, labels = encoded["input_ids"], encoded["labels"]
    trained = tokenizer.decode([i for i, label in zip(ids, labels, strict=True) if label != -100])
    masked = tokenizer.decode([i for i, label in zip(ids, labels, strict=True) if label == -100])

    # Exactly the model's own tokens carry loss: both calls, the answer, and each turn's end token.
    assert trained == f"{CALLS}<|im_end|>\n{ANSWER}<|im_end|>"
    # Observations, the tool-response wrapper, the prompt and the tool schemas never do.
    assert "<tool_response>" in masked and "4242" in masked and "3000.0" in masked
    assert "<tool_response>" not in trained and "3000.0" not in trained
    assert '"name": "convert", "description"' in masked  # tool schemas rendered into the system prompt
    # The sampled end token is not doubled before the tool block (ms-swift 4.6 renders its own).
    full = tokenizer.decode(ids)
    assert "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>" in full
    assert "<|im_end|><|im_end|>" not in full


USER_ENV = AGENT_ENV.parents[1] / "user" / "env.yaml"
ASK = "Which order do you mean?"
LOOKUP = '<tool_call>\n{"name": "order_status", "arguments": {"order_id": "A-17"}}\n</tool_call>'


def test_simulated_user_turns_are_masked_like_observations(agent_model, monkeypatch):
    """A scripted user's reply (tests/environments/user) enters the sequence as a ``user`` turn with no
    loss; the agent's question, its call and its answer are exactly what is trained."""
    monkeypatch.setenv("RLFACTORY_ENV", str(USER_ENV))
    processor = get_processor(str(agent_model), model_type="qwen3", check_model=False)
    template = get_template(processor, template_type="qwen3", max_length=4096)
    template.set_mode("train")
    tokenizer = template.tokenizer
    scheduler = RLFactoryScheduler(max_turns=5, tokenizer=tokenizer, template=template)
    prefix_ids = get_response_prefix_ids(template)
    prefix = tokenizer.decode(prefix_ids) if prefix_ids else ""

    request = RolloutInferRequest(
        messages=[{"role": "user", "content": "Where is my parcel?"}],
        uuid="u-1",
        data_dict={"user_goal": {"order_id": "A-17"}},
    )
    asyncio.run(scheduler.on_trajectory_start([request]))
    replies = iter([LOOKUP, "<answer>shipped</answer>"])
    [out] = run_multi_turn(
        [request],
        [scripted_output(tokenizer, prefix, ASK)],
        scheduler,
        lambda reqs, cfg: [scripted_output(tokenizer, prefix, next(replies)) for _ in reqs],
        RequestConfig(),
        max_turns=5,
    )

    info = out.rollout_infos["rlfactory"]
    assert info["stop_reason"] == "answer" and out.rollout_infos["num_turns"] == 3
    assert [c["observation"] for c in info["tool_calls"]] == ["shipped"]
    assert [(r["turn"], r["error"]) for r in info["user_calls"]] == [(1, None)]
    roles = [m["role"] for m in out.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]

    messages = replace_assistant_response_with_ids(
        [m.copy() for m in out.messages],
        out.response_token_ids,
        out.response_loss_mask,
        non_thinking_prefix_ids=prefix_ids,
    )
    encoded = template.encode({"messages": messages})
    ids, labels = encoded["input_ids"], encoded["labels"]
    trained = tokenizer.decode([i for i, label in zip(ids, labels, strict=True) if label != -100])
    masked = tokenizer.decode([i for i, label in zip(ids, labels, strict=True) if label == -100])

    # Exactly the model's own tokens carry loss: the question, the call, the answer, each turn's end.
    assert trained == f"{ASK}<|im_end|>\n{LOOKUP}<|im_end|>\n<answer>shipped</answer><|im_end|>"
    # The user's reply (and its role markers) never does, nor the observation after it.
    assert "My order is A-17." in masked and "My order is A-17." not in trained
    full = tokenizer.decode(ids)
    assert f"{ASK}<|im_end|>\n<|im_start|>user\nMy order is A-17.<|im_end|>\n<|im_start|>assistant\n" in full
    assert "<|im_end|><|im_end|>" not in full
