"""A second agent trained to delegate: its one tool is an agent served by `swift-rlfactory serve-agent`.

The outer environment lists the inner agent in `mcpServers` (a stdio server: serve-agent as a subprocess),
a tiny Qwen3 taught by a few seconds of SFT to pass the question on trains for two GRPO steps through the
real `swift rlhf` CLI, and the inner agent's trace is read back from the run's trajectories.jsonl.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from swift_rlfactory.env.environment import Environment
from swift_rlfactory.runs.log import read_trajectories

from .conftest import AGENT_ENV, AGENT_PAIRS, CACHE, ScriptedChat, run_cpu_grpo
from .fixtures.tiny_qwen3 import build_tiny_qwen3
from .test_serve_agent import question, scripted

SYSTEM = "Ask the adder agent, then answer in <answer></answer>."


@pytest.fixture(scope="module")
def inner_model() -> Iterator[ScriptedChat]:
    """The inner agent's model: a served, scripted one (it calls `add`, and `convert` for even a)."""
    with ScriptedChat(scripted) as server:
        yield server


@pytest.fixture(scope="module")
def outer_env(inner_model: ScriptedChat, tmp_path_factory) -> Path:
    inner = [
        "-m", "swift_rlfactory.cli", "serve-agent", str(AGENT_ENV),
        "--base-url", f"http://127.0.0.1:{inner_model.port}/v1", "--served-model", "scripted",
        "--tool-name", "adder",
    ]  # fmt: skip
    config = {
        "name": "delegator",
        "system_prompt": SYSTEM,
        "tools": {
            "mcp": {
                "mcpServers": {
                    "inner": {
                        "command": sys.executable,
                        "args": inner,
                        "inherit_env": True,
                        "startup_timeout_s": 300,
                    }
                }
            }
        },
        "limits": {"max_turns": 3, "call_timeout_s": 120},
        "reward": [{"name": "em", "weight": 1.0}],
    }
    path = tmp_path_factory.mktemp("delegator") / "env.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def outer_model(outer_env: Path, qwen3_tokenizer_dir: Path) -> Path:
    """Tiny Qwen3 that passes the question to `adder` and answers with what it says."""
    examples = []
    with Environment.load(outer_env) as env:
        tools = env.tool_schemas()
        for a, b in AGENT_PAIRS:
            arguments = {"task": question(a, b)}
            observation = env.try_tool("adder", arguments).observation  # what the inner agent really says
            call = json.dumps({"name": "adder", "arguments": arguments})
            messages = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": question(a, b)},
                {"role": "assistant", "content": f"<tool_call>\n{call}\n</tool_call>"},
                {"role": "tool", "content": observation},
                {"role": "assistant", "content": f"<answer>{a + b}</answer>"},
            ]
            examples.append({"tools": tools, "messages": messages})
    return build_tiny_qwen3(CACHE / "tiny-delegator", qwen3_tokenizer_dir, sft_examples=examples, seed=0)


def test_the_outer_agents_calls_reach_the_inner_agent(
    outer_env: Path, outer_model: Path, inner_model: ScriptedChat, tmp_path: Path
):
    rows = [
        {"messages": [{"role": "user", "content": question(a, b)}], "solution": str(a + b)}
        for a, b in AGENT_PAIRS
    ]
    asked_before = len(inner_model.requests)
    run = run_cpu_grpo(tmp_path, outer_model, rows, {"RLFACTORY_ENV": str(outer_env)}, "--temperature", "0.5")
    trajectories = read_trajectories(run / "trajectories.jsonl")
    assert len(trajectories) >= 8  # 2 steps x 4 completions
    delegated = [
        c for t in trajectories for c in t["tool_calls"] if c["tool"] == "adder" and c["error"] is None
    ]
    assert delegated, trajectories[0]
    for call in delegated:  # the inner agent's own answer and trace, as its tool result
        task = call["arguments"]["task"]
        observation = call["observation"]
        assert observation.startswith("answer: ") and "\ntrace: " in observation, observation
        assert "- turn 1: add " in observation or "0 tool calls" in observation, observation
        # the inner agent's model was asked this very task by the inner agent's loop
        assert any(
            m["role"] == "user" and m["content"] == task
            for body in inner_model.requests[asked_before:]
            for m in body["messages"]
        ), task
    logs = [json.loads(line) for line in (run / "logging.jsonl").read_text().splitlines()]
    assert any(entry.get("tools/calls_per_trajectory", 0) > 0 for entry in logs if "reward" in entry)
