"""End to end: the real `swift rlhf --rlhf_type grpo` CLI with our plugin, on CPU.

A tiny Qwen3 (taught by a few seconds of SFT to call tools) trains with LoRA for two steps. Its tool calls
come from real model text through the real parse -> execute -> observe path: a Python tool in-process and
a unit converter MCP server over stdio. Everything asserted is read from what the run left on disk.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from swift_rlfactory.runs.log import read_trajectories

from .conftest import AGENT_ENV, AGENT_PAIRS, run_cpu_grpo

WRONG = AGENT_PAIRS[-1]  # the row whose solution is off by one


def solution(a: int, b: int) -> str:
    return str(a + b + ((a, b) == WRONG))


@pytest.fixture(scope="module")
def grpo_run(agent_model: Path, tmp_path_factory) -> Path:
    # One row's solution is deliberately wrong (the model answers the true sum), so that `em` is seen to
    # score 0 as well as 1: an `em` that always returns 1.0 must fail this test.
    rows = [
        {"messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "solution": solution(a, b)}
        for a, b in AGENT_PAIRS
    ]
    work = tmp_path_factory.mktemp("grpo")
    env = {"RLFACTORY_ENV": str(AGENT_ENV)}
    return run_cpu_grpo(work, agent_model, rows, env, "--save_steps", "2", "--temperature", "0.7")


def test_tool_calls_were_executed_and_observed(grpo_run: Path):
    trajectories = read_trajectories(grpo_run / "trajectories.jsonl")
    assert len(trajectories) >= 8  # 2 steps x 4 completions
    executed = [c for t in trajectories for c in t["tool_calls"] if c["error"] is None]
    tools_run = {c["tool"] for c in executed}
    assert {"add", "convert"} <= tools_run, trajectories[0]
    for t in trajectories:
        observed = [m["content"] for m in t["messages"] if m["role"] == "tool"]
        for call in t["tool_calls"]:
            assert call["observation"] in observed  # every executed call came back as a tool message
        for call in t["tool_calls"]:
            if call["tool"] == "add" and call["error"] is None:
                args = call["arguments"]
                assert call["observation"] == str(int(args["a"]) + int(args["b"]))
            if call["tool"] == "convert" and call["error"] is None:  # answered by the MCP server process
                args = call["arguments"]
                if (args["from_unit"], args["to_unit"]) == ("km", "m"):
                    assert float(call["observation"]) == float(args["value"]) * 1000


def test_rewards_were_computed(grpo_run: Path):
    trajectories = read_trajectories(grpo_run / "trajectories.jsonl")
    for t in trajectories:
        assert set(t["rewards"]) == {"em", "format", "tool_use", "total"}
        expected = t["rewards"]["em"] + 0.2 * t["rewards"]["format"] + 0.1 * t["rewards"]["tool_use"]
        assert t["rewards"]["total"] == pytest.approx(expected)
        final = t["messages"][-1]["content"] if t["messages"][-1]["role"] == "assistant" else ""
        answers = re.findall(r"<answer>(.*?)</answer>", final, re.DOTALL)
        right = bool(answers) and answers[-1].strip() == t["row"]["solution"]
        assert t["rewards"]["em"] == float(right), (final, t["row"]["solution"])
        assert t["stop_reason"] != "error" and t["error"] is None, t["error"]
    ems = [t["rewards"]["em"] for t in trajectories]
    assert 1.0 in ems and 0.0 in ems  # both directions were exercised (the WRONG row always scores 0)
    logs = [json.loads(line) for line in (grpo_run / "logging.jsonl").read_text().splitlines()]
    train_logs = [entry for entry in logs if "reward" in entry]
    assert train_logs and all("tools/calls_per_trajectory" in entry for entry in train_logs)
    assert any(entry["tools/calls_per_trajectory"] > 0 for entry in train_logs)
    for entry in train_logs:  # a step with calls has a chain of at least one tool turn, one without has none
        assert (entry["tools/max_tool_turns"] > 0) == (entry["tools/calls_per_trajectory"] > 0)


def test_lora_adapter_was_saved(grpo_run: Path):
    adapters = list(grpo_run.glob("checkpoint-*/adapter_model.safetensors"))
    assert adapters and adapters[0].stat().st_size > 0
    config = json.loads((adapters[0].parent / "adapter_config.json").read_text())
    assert config["r"] == 8


def test_step_timeline_was_logged(grpo_run: Path):
    """Each step's time, split by phase (adapters/swift_timeline.py), is in logging.jsonl and adds up."""
    logs = [json.loads(line) for line in (grpo_run / "logging.jsonl").read_text().splitlines()]
    train_logs = [entry for entry in logs if "reward" in entry]
    assert train_logs
    phases = ("generation", "tools", "reward", "weight_sync", "train")
    for entry in train_logs:
        seconds = {p: entry[f"timeline/{p}_s"] for p in phases}
        step = entry["timeline/step_s"]
        assert all(v >= 0 for v in seconds.values()), entry
        assert sum(seconds.values()) <= step + 1e-6, entry
        assert entry["timeline/other_s"] >= 0
        assert sum(seconds.values()) + entry["timeline/other_s"] == pytest.approx(step, rel=1e-6, abs=1e-6)
        assert 0 < step <= entry["step_time"] * 1.5 + 1, entry  # the same step ms-swift timed
        assert seconds["generation"] > 0 and seconds["train"] > 0 and seconds["reward"] > 0, entry
        assert seconds["weight_sync"] == 0  # no vLLM engine on CPU
        assert (seconds["tools"] > 0) == (entry["tools/calls_per_trajectory"] > 0), entry
        assert 0 <= entry["timeline/tool_chain_s"] <= seconds["tools"] + 1e-6, entry
        assert sum(entry[f"timeline/share/{p}"] for p in (*phases, "other")) == pytest.approx(1.0, abs=1e-6)
