"""The environment's system prompt and tool schemas go into a row's system message once, however often the
row passes through :func:`set_system_prompt` (an SFT episode written by it and then trained on by GRPO)."""

from __future__ import annotations

import pytest

from swift_rlfactory.adapters.swift_template import template_by_name, with_system_prompt

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the wiki.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
]


@pytest.mark.parametrize("template_type", [None, "qwen3", "qwen2_5"])
@pytest.mark.parametrize("prompt", ["Answer with <answer></answer>.", None])
@pytest.mark.parametrize("own_system", [None, "You are terse."])
def test_rendering_the_system_prompt_twice_changes_nothing(template_type, prompt, own_system):
    template = template_by_name(template_type)
    messages = ([{"role": "system", "content": own_system}] if own_system else []) + [
        {"role": "user", "content": "Who wrote Hamlet?"}
    ]
    once = with_system_prompt(messages, template, prompt, TOOLS)
    assert once[0]["role"] == "system" and once[0]["content"].count('"search"') == 1
    assert with_system_prompt(once, template, prompt, TOOLS) == once
    if own_system:
        assert own_system in once[0]["content"]


def test_a_template_that_puts_tools_in_the_user_message_gets_them_once():
    """Llama 3's agent template writes the tool schemas into the first user message, not the system."""
    once = with_system_prompt(
        [{"role": "user", "content": "Who?"}], template_by_name("llama3_2"), "Be brief.", TOOLS
    )
    assert [m["content"].count('"search"') for m in once] == [0, 1]
