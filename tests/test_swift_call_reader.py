"""ms-swift's own ``get_toolcall`` reads the calls of the agent templates our parsers do not (SWIFT_READS):
for each, a call rendered as the template renders one (what its model is trained to write) comes back
with its name and arguments after prose too, two calls come back as two, a final answer (even one that
quotes call JSON) is no call, and a call inside reasoning does not run."""

from __future__ import annotations

import json

import pytest

from swift_rlfactory.adapters.swift_template import SWIFT_READS, TemplateByName, call_format
from swift_rlfactory.tools.calls import call_parser
from swift_rlfactory.tools.calls.delegated import DelegatedFormat

TOOLS = [
    {
        "name": name,
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "n": {"type": "integer"},
                "exact": {"type": "boolean"},
            },
        },
    }
    for name in ("search", "run")
]
FIRST = ("search", {"query": "capital of 法国", "n": 3, "exact": True})
SECOND = ("run", {"query": "print(1)"})


def parser_of(name: str):
    from swift.agent_template import agent_template_map

    agent = agent_template_map[name]()
    return agent, call_parser(call_format(TemplateByName(template_meta=None, agent_template=agent)), TOOLS)


def rendered(agent, *calls) -> str:
    messages = [{"role": "assistant", "content": json.dumps({"name": n, "arguments": a})} for n, a in calls]
    return agent._format_tool_calls(messages)


def read(parse, text: str) -> list[tuple[str, dict, str | None]]:
    return [(c.name, c.arguments, c.error) for c in parse(text)]


@pytest.mark.parametrize("name", sorted(SWIFT_READS))
def test_the_template_s_own_calls_read_back_and_its_answers_stay_answers(name):
    agent, parse = parser_of(name)
    one = rendered(agent, FIRST)
    assert read(parse, one) == [(*FIRST, None)]
    assert read(parse, "Let me look that up.\n" + one) == [(*FIRST, None)]
    assert read(parse, rendered(agent, FIRST, SECOND)) == [(*FIRST, None), (*SECOND, None)]
    assert read(parse, "The capital of France is Paris.") == []
    assert read(parse, 'It answers {"name": "search", "arguments": {}} with Paris.') == []
    assert read(parse, f"<think>maybe {one}</think>Paris.") == []  # reasoning is not acted on


def test_hunyuan_reads_the_name_and_fenced_json_its_prompt_asks_for():
    agent, parse = parser_of("hunyuan_hermes")
    text = '<tool_calls>\n<tool_call>search\n```json\n{"query": "x", "n": 2}\n```</tool_call>\n</tool_calls>'
    assert "```json" in agent._format_tools(TOOLS, "")  # what the prompt asks for
    assert read(parse, text) == [("search", {"query": "x", "n": 2}, None)]


def test_a_reader_that_raises_or_gives_a_bad_call_gives_error_calls_never_an_exception():
    def broken(text: str):
        raise RuntimeError("no")

    assert [c.error is not None for c in DelegatedFormat("t-raises", broken).parser(TOOLS)("x")] == [True]
    bad = DelegatedFormat("t-bad", lambda text: [("search", "{'n': }"), ("", {})]).parser(TOOLS)("x")
    assert [c.error is not None for c in bad] == [True, True]
