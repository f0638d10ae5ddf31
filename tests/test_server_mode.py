"""The server-mode path: ms-swift's ``MultiTurnScheduler.run()``, one coroutine per trajectory.

``swift rollout`` (vLLM only, so not runnable here) serves ``--multi_turn_scheduler rlfactory`` by awaiting
``scheduler.run(request, config)`` for every trajectory concurrently on one event loop. This test drives
that same ``run()`` with a real engine (ms-swift's transformers engine, the tiny tool-calling model) and the
request settings the GRPO rollout client sends (``return_details=True``): the tools must really run from
inside the caller's event loop, each trajectory's turns must come back as the sampled token ids with loss on
them, and the observations must sit in the history as ``tool`` messages, outside every trained turn.
"""

from __future__ import annotations

import asyncio

from swift.infer_engine import TransformersEngine
from swift.infer_engine.protocol import RequestConfig, RolloutInferRequest

from swift_rlfactory.adapters.swift import INFO_KEY, RLFactoryScheduler

from .conftest import AGENT_ENV, AGENT_PAIRS


def test_run_serves_concurrent_trajectories_with_real_tools(agent_model, monkeypatch):
    monkeypatch.setenv("RLFACTORY_ENV", str(AGENT_ENV))
    engine = TransformersEngine(str(agent_model), model_type="qwen3", template_type="qwen3", max_batch_size=8)
    scheduler = RLFactoryScheduler(infer_engine=engine, max_turns=3)
    requests = [
        RolloutInferRequest(messages=[{"role": "user", "content": f"What is {a} + {b}?"}], uuid=f"q{i}")
        for i, (a, b) in enumerate(AGENT_PAIRS * 2)
    ]
    config = RequestConfig(max_tokens=96, temperature=0.0, return_details=True)

    async def serve() -> list:
        return await asyncio.gather(*(scheduler.run(request, config) for request in requests))

    outputs = asyncio.run(asyncio.wait_for(serve(), timeout=300))

    called = 0
    for output in outputs:
        info = output.rollout_infos[INFO_KEY]
        roles = [m["role"] for m in output.messages]
        assert roles[:2] == ["system", "user"] and '"name": "convert"' in output.messages[0]["content"]
        calls = [c for c in info["tool_calls"] if c["error"] is None]
        called += bool(calls)
        for call in calls:  # each observation reached the history as a tool message
            assert {"role": "tool", "content": call["observation"]} in output.messages
        if any(c["tool"] == "convert" for c in calls):  # answered by the MCP server process
            convert = next(c for c in calls if c["tool"] == "convert")
            assert convert["observation"] == f"{float(convert['arguments']['value'] * 1000)}"
        assert len(output.response_token_ids) == info["turns"] == output.rollout_infos["num_turns"]
        for ids, mask in zip(output.response_token_ids, output.response_loss_mask, strict=True):
            assert len(ids) == len(mask) and sum(mask) > 0
        tool_turns = [i for i, m in enumerate(output.messages) if m["role"] == "tool"]
        if tool_turns:  # the calling turn went back into the history as its sampled ids
            assistant = output.messages[tool_turns[0] - 1]
            assert assistant["role"] == "assistant" and assistant["content"] == output.response_token_ids[0]
    assert called == len(requests)  # the tiny model calls tools in every trajectory
    assert not scheduler.episodes  # every trajectory finished and was forgotten
