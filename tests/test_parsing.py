"""Tool-call parsing: hermes blocks, near-JSON repair, fences, and errors as values."""

import pytest

from swift_rlfactory.tools.parsing import has_tool_call, parse_tool_calls


def test_hermes_block_with_surrounding_text():
    text = 'Let me compute.\n<tool_call>\n{"name": "calculate", "arguments": {"expression": "3*4"}}\n</tool_call>'
    [call] = parse_tool_calls(text)
    assert (call.name, call.arguments, call.error) == ("calculate", {"expression": "3*4"}, None)


def test_several_calls_in_one_turn_keep_order():
    text = "".join(f'<tool_call>{{"name": "t{i}", "arguments": {{"i": {i}}}}}</tool_call>' for i in range(3))
    assert [(c.name, c.arguments["i"]) for c in parse_tool_calls(text)] == [("t0", 0), ("t1", 1), ("t2", 2)]


@pytest.mark.parametrize(
    "body",
    [
        "{'name': 'search', 'arguments': {'query': 'x'}}",  # single quotes
        '{"name": "search", "arguments": {"query": "x"},}',  # trailing comma
        '{"name": "search", "arguments": {"query": "x"}',  # missing brace
        '```json\n{"name": "search", "arguments": {"query": "x"}}\n```',  # code fence
        '{"name": "search", "arguments": "{\\"query\\": \\"x\\"}"}',  # arguments as a JSON string
        '{"name": "search", "parameters": {"query": "x"}}',  # "parameters" instead of "arguments"
    ],
)
def test_near_json_is_repaired(body):
    [call] = parse_tool_calls(f"<tool_call>{body}</tool_call>")
    assert call.error is None
    assert (call.name, call.arguments) == ("search", {"query": "x"})


def test_unclosed_last_block_still_parses():
    [call] = parse_tool_calls('<tool_call>{"name": "search", "arguments": {"query": "x"}}')
    assert call.name == "search" and call.error is None


@pytest.mark.parametrize(
    "body, message",
    [
        ("", "empty"),
        ("just words", "not a JSON object"),
        ('{"arguments": {}}', 'no "name"'),
        ('{"name": "search", "arguments": [1, 2]}', "must be a JSON object"),
    ],
)
def test_unreadable_calls_become_errors_not_exceptions(body, message):
    [call] = parse_tool_calls(f"<tool_call>{body}</tool_call>")
    assert call.error is not None and message in call.error


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "calculate", "arguments": {"expression": "37 * 12"}}',
        '```json\n{\n  "name": "calculate",\n  "arguments": {\n    "expression": "37 * 12"\n  }\n}\n```',
        '<think>\n\n</think>\n\n{"name": "calculate", "arguments": {"expression": "37 * 12"}}\n',
    ],
)
def test_a_reply_that_is_only_a_call_object_is_a_call(text):
    [call] = parse_tool_calls(text)  # hermes without its tags, as Qwen2.5-Coder-0.5B writes it
    assert (call.name, call.arguments, call.error) == ("calculate", {"expression": "37 * 12"}, None)


@pytest.mark.parametrize(
    "text",
    [
        'The call would be {"name": "calculate", "arguments": {"expression": "1"}}',  # prose around it
        '{"name": "calculate", "arguments": "1 + 2"}',  # arguments not an object
        '{"answer": 444}',  # JSON, but not a call
        "{'name': 'calculate', 'arguments': {}}",  # not strict JSON: only tagged blocks get repaired
    ],
)
def test_other_text_with_json_is_not_a_call(text):
    assert parse_tool_calls(text) == []


def test_plain_answer_has_no_calls():
    assert parse_tool_calls("<answer>42</answer>") == []
    assert not has_tool_call("<answer>42</answer>")
