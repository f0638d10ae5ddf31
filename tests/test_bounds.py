"""Bounds on what a model or a server pours into a prompt: calls per turn, and the prompt's size at start-up."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from swift_rlfactory.env.config import LimitsConfig
from swift_rlfactory.env.environment import Environment
from swift_rlfactory.env.prompt_size import PromptSize, PromptTooLongError, check_prompt_room, prompt_size
from swift_rlfactory.rollout.episode import Generation, run_episode
from swift_rlfactory.tools import Limits, ToolExecutor, tool
from swift_rlfactory.tools.toolset import PythonProvider

from .conftest import AGENT_PAIRS, ROOT, run_cpu_grpo

RAN: list[str] = []


@tool
def echo(text: str) -> str:
    """Return the text."""
    RAN.append(text)
    return text


def test_a_thousand_calls_in_one_turn_add_a_bounded_number_of_tool_messages():
    RAN.clear()
    flood = "".join(
        f'<tool_call>{{"name": "echo", "arguments": {{"text": "{i}"}}}}</tool_call>' for i in range(1000)
    )
    turns = iter([flood, "<answer>done</answer>"])
    seen: list[list[dict]] = []

    async def generate(messages):
        seen.append(list(messages))
        return Generation(next(turns))

    cap = LimitsConfig().max_calls_per_turn  # the default an environment without limits gets
    with ToolExecutor([PythonProvider([echo])], Limits()) as executor:
        prompt = [{"role": "user", "content": "q"}]
        trajectory = asyncio.run(run_episode(prompt, generate, executor, 4, cap))

    assert sorted(map(int, RAN)) == list(range(cap))  # the calls that run are capped (they run at once)
    tool_messages = [m["content"] for m in seen[1] if m["role"] == "tool"]
    assert len(tool_messages) == 2 * cap  # not 1,000: the refused calls past the cap are counted, not shown
    assert all("too many tool calls in one turn" in m for m in tool_messages[cap:])
    assert f"the {1000 - 2 * cap} calls after this one were not run either" in tool_messages[-1]
    assert [c["error_kind"] for c in trajectory.tool_calls] == [None] * cap + ["limit"] * cap
    assert trajectory.stop_reason == "answer"


def test_a_prompt_without_room_for_the_answer_is_an_error_naming_the_numbers_and_the_fix():
    size = PromptSize(tokens=1900, tools=5000, estimated=True)
    with pytest.raises(PromptTooLongError) as error:
        check_prompt_room(size, max_length=2048, max_completion_length=256)
    message = str(error.value)
    assert "~1,900 tokens" in message and "5000 tool schemas" in message and "2,048" in message
    assert "--max_completion_length is 256" in message and "at least 2,156" in message
    with pytest.raises(PromptTooLongError, match="leaves no room for the answer"):
        check_prompt_room(PromptSize(3000, 1, False), max_length=2048, max_completion_length=None)


def test_a_prompt_over_half_the_context_is_a_warning_with_the_numbers(caplog):
    warning = check_prompt_room(PromptSize(1200, 3, False), max_length=2048, max_completion_length=256)
    assert warning is not None and "1,200 tokens" in warning and "592 are left" in warning
    assert warning in caplog.text
    assert check_prompt_room(PromptSize(500, 3, False), max_length=2048, max_completion_length=256) is None
    assert check_prompt_room(PromptSize(10**6, 3, False), max_length=None, max_completion_length=256) is None


def test_the_prompt_is_counted_with_the_tokenizer_or_estimated_as_chars_over_4(qwen3_tokenizer_dir: Path):
    from transformers import AutoTokenizer

    tools = [{"type": "function", "function": {"name": f"t{i}", "description": "x" * 200}} for i in range(50)]
    estimate = prompt_size("You are helpful.", tools)
    text = "You are helpful.\n" + "\n".join(json.dumps(t) for t in tools)
    assert estimate.estimated and estimate.tokens == -(-len(text) // 4)
    tokenizer = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir)
    exact = prompt_size(
        "You are helpful.", tools, lambda s: len(tokenizer.encode(s, add_special_tokens=False))
    )
    assert not exact.estimated and exact.tokens == len(tokenizer.encode(text, add_special_tokens=False))
    assert exact.tools == 50


def test_an_environment_measures_its_own_prompt():
    with Environment.load(ROOT / "swift_rlfactory" / "bundled" / "calculator" / "env.yaml") as env:
        size, schemas = env.prompt_size(), env.tool_schemas()
    text = (env.system_prompt or "") + "\n" + "\n".join(json.dumps(t) for t in schemas)
    assert size.estimated and size.tokens == -(-len(text) // 4) and size.tools == len(schemas) == 1


@pytest.mark.timeout(900)
def test_swift_rlhf_stops_at_start_up_when_the_prompt_leaves_no_room(agent_model: Path, tmp_path: Path):
    env = tmp_path / "env.yaml"
    tools = ROOT / "tests" / "environments" / "agent" / "tools.py"
    env.write_text(f"name: long\nsystem_prompt: {'word ' * 2500}\ntools:\n  python: [{tools}]\n")
    rows = [{"messages": [{"role": "user", "content": f"What is {a} + {b}?"}]} for a, b in AGENT_PAIRS]
    with pytest.raises(AssertionError) as failed:
        run_cpu_grpo(tmp_path, agent_model, rows, {"RLFACTORY_ENV": str(env)})
    assert "PromptTooLongError" in str(failed.value) and "--max_length 2,048" in str(failed.value)
    assert not list((tmp_path / "out").glob("*/checkpoint-*"))  # stopped before any step
