"""Tool-call parsing: hermes blocks, near-JSON repair, fences, and errors as values."""

import json

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


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "f", "arguments": {"x": 1}}\n{"name": "g", "arguments": {}}',
        '{"name": "f", "arguments": {"x": 1}} {"name": "g", "arguments": {}}\n',
        '```json\n{"name": "f", "arguments": {"x": 1}}\n{"name": "g", "arguments": {}}\n```',
        '[{"name": "f", "arguments": {"x": 1}}]\n{"name": "g", "parameters": {}}',
    ],
)
def test_a_reply_of_bare_call_objects_one_after_another_is_those_calls(text):
    """As inside a <tool_call> block: dropping them would end the trajectory as an answer."""
    assert [(c.name, c.arguments, c.error) for c in parse_tool_calls(text)] == [
        ("f", {"x": 1}, None),
        ("g", {}, None),
    ]


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "f", "arguments": {}}\n{"name": "g"}',  # one of them without explicit arguments
        '{"name": "f", "arguments": {}}\nSo the answer is 4.',  # prose after the calls
        '{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}',  # a comma is not an array
        '{"name": "f", "arguments": {"n": NaN}}',  # not strict JSON
        '{"answer": 1}\n{"answer": 2}',  # JSON, but no call
    ],
)
def test_bare_json_that_is_not_all_valid_calls_is_no_call(text):
    assert parse_tool_calls(text) == []


def test_plain_answer_has_no_calls():
    assert parse_tool_calls("<answer>42</answer>") == []
    assert not has_tool_call("<answer>42</answer>")


def block(body: str) -> str:
    return f"<tool_call>{body}</tool_call>"


@pytest.mark.parametrize(
    "body, arguments",
    [
        ('{"name": "f", // why\n "arguments": {"a": 1} /* done */}', {"a": 1}),  # comments
        (
            '{"name": "f", "arguments": {"a": True, "b": False, "c": None}}',
            {"a": True, "b": False, "c": None},
        ),
        ('{"name": "f", "arguments": {"code": "a\n\tb"}}', {"code": "a\n\tb"}),  # raw newline in a string
        ('{"name": "f", "arguments": {"re": "\\d+\\."}}', {"re": "\\d+\\."}),  # an escape JSON lacks: kept
        ("{'name': 'f', 'arguments': {'q': 'it\\'s \"x\"'}}", {"q": 'it\'s "x"'}),
        ('{"name": "f", "arguments": {"l": [1, 2,],},}', {"l": [1, 2]}),  # trailing commas everywhere
        ('{"name": "f", "arguments": {"a": 1}}}', {"a": 1}),  # an extra closing brace
        ('```JSON\n{"name": "f", "arguments": {"a": 1}}\n```', {"a": 1}),
        ('\n  {"name": "f",\n   "arguments": {}}\n', {}),
        ('{"name": "f", "arguments": null}', {}),
        ('{"name": "f", "arguments": ""}', {}),
        ('{"name": "f"}', {}),  # a tool without arguments
        ('{"name": "f", "arguments": {"s": "\\u00fc\\ud83d\\ude00 ü 😀 漢字"}}', {"s": "ü😀 ü 😀 漢字"}),
        ('{"name": "f", "arguments": "{\'a\': 1,}"}', {"a": 1}),  # a near-JSON arguments string
    ],
)
def test_repairs_that_keep_every_value_are_accepted(body, arguments):
    [call] = parse_tool_calls(block(body))
    assert (call.name, call.arguments, call.error) == ("f", arguments, None)


@pytest.mark.parametrize(
    "text, message",
    [
        (block('{"name": "f", "arguments": {"y": }}'), "Expecting value"),  # json-repair: {"y": ""}
        (block('{"name": "f", "arguments": {"y": , "z": 1}}'), "Expecting value"),
        (block('{"name": "f", "arguments": {"q": "x" "y"}}'), "delimiter"),  # json-repair drops "y"
        (block('{"name": "f", "arguments": {"a": 1, "b"}}'), "delimiter"),  # json-repair drops "b"
        (block('{"name": "f", "arguments": {"a": -}}'), "expected a value"),
        (block('{"name": "f", "arguments": {"q": undefined}}'), "expected a value"),
        (block('{"name": "f", "arguments": {"q": [1, 2}, "r": 3}}'), "does not close"),
        (block('{"name": "f", "arguments": {"q": "it"s"}}'), "expected a value"),
        (block('Calling f now: {"name": "f", "arguments": {}}'), "not a JSON object"),  # text thrown away
        (block('{"name": "f", "arguments": {}} and then g'), "after the JSON"),
        ('<tool_call>{"name": "f", "arguments": {"q": "Par', "never closed"),  # a truncated string
        ('<tool_call>{"name": "f", "arguments": {"n": 12', "before it is complete"),  # 12 or 123?
        ('<tool_call>{"name": "f", "arguments": {"q": "x",', "before it is complete"),
        (block('{"name": "f", "query": "x"}'), 'unexpected key "query"'),  # would run without its query
        (block('{"name": "f", "arguments": {}, "parameters": {"a": 1}}'), "not both"),
        (block('{"name": 7, "arguments": {}}'), '"name" must be a non-empty string'),
        (block('{"name": "", "arguments": {}}'), '"name" must be a non-empty string'),
        (block('{"name": "f", "arguments": "not json"}'), "not one JSON object"),
        (block('{"name": "f", "arguments": 3}'), "must be a JSON object"),
        (block("[]"), "empty list"),
        (block('"f"'), "not a JSON object"),
        (block('{"name": "f", "arguments": {"q": "\\ud83d"}}'), "lone surrogate \\ud83d"),
        (block('{"name": "f", "arguments": {"q": "\udc00"}}'), "lone surrogate \\udc00"),
        # numbers JSON does not know: an MCP server would receive null, and the trajectory log invalid JSON
        (block('{"name": "f", "arguments": {"n": NaN}}'), "expected a value"),
        (block('{"name": "f", "arguments": {"n": -Infinity}}'), "expected a value"),
        (block("{'name': 'f', 'arguments': {'n': Infinity,}}"), "expected a value"),  # on the repair path too
        (block('{"name": "f", "arguments": {"n": %s}}' % ("9" * 5000)), "a number too long to read"),
        # a number out of float range reads as infinity: as unknown to JSON as Infinity, so refused alike
        (block('{"name": "f", "arguments": {"seconds": 1e400}}'), 'argument "seconds" is out of range'),
        (block("{'name': 'f', 'arguments': {'n': -1e999,}}"), 'argument "n" is out of range'),  # repaired
        (block('{"name": "f", "arguments": {"opts": {"xs": [1, 2e308]}}}'), 'argument "opts.xs[1]"'),
        (block('{"name": "f", "arguments": "{\\"n\\": 1e400}"}'), 'argument "n" is out of range'),
    ],
)
def test_repairs_that_would_change_meaning_become_error_calls(text, message):
    [call] = parse_tool_calls(text)
    assert call.error is not None and message in call.error, call.error
    assert "\n" not in call.error and len(call.error) < 300
    call.error.encode("utf-8")  # the observation must reach the model


def test_a_closing_tag_inside_a_json_string_is_argument_text():
    code = 'print("</tool_call>")\nprint("<tool_call>", "<think>")'
    text = block(json.dumps({"name": "run", "arguments": {"code": code}})) + block('{"name": "g"}')
    assert [(c.name, c.arguments, c.error) for c in parse_tool_calls(text)] == [
        ("run", {"code": code}, None),
        ("g", {}, None),
    ]


def test_a_broken_block_does_not_swallow_the_next_one():
    text = block('{"name": "f", "arguments": {"q": "it"s}}') + "\n" + block('{"name": "g", "arguments": {}}')
    bad, good = parse_tool_calls(text)
    assert bad.error is not None and (good.name, good.error) == ("g", None)
    unclosed = '<tool_call>{"name": "f", "arguments": {}}\n<tool_call>{"name": "g", "arguments": {}}'
    assert [c.name for c in parse_tool_calls(unclosed)] == ["f", "g"]


@pytest.mark.parametrize(
    "body",
    [
        '[{"name": "f", "arguments": {"i": 0}}, {"name": "g", "arguments": {"i": 1}}]',
        '{"name": "f", "arguments": {"i": 0}}\n{"name": "g", "arguments": {"i": 1}}',
        '{"name": "f", "arguments": {"i": 0}}, {"name": "g", "arguments": {"i": 1}}',
        '[{"type": "function", "function": {"name": "f", "arguments": "{\\"i\\": 0}"}},'
        ' {"id": "call_1", "function": {"name": "g", "arguments": {"i": 1}}}]',
    ],
)
def test_several_calls_in_one_block(body):
    assert [(c.name, c.arguments, c.error) for c in parse_tool_calls(block(body))] == [
        ("f", {"i": 0}, None),
        ("g", {"i": 1}, None),
    ]


CALL = block('{"name": "f", "arguments": {}}')


@pytest.mark.parametrize(
    "text, names",
    [
        (f"<think>maybe {CALL}?</think>The answer is 4.", []),
        (f"<think>a</think>{CALL}<think>b {CALL.replace('f', 'g')}</think>", ["f"]),  # several think blocks
        (f"{CALL}<think>never closed {CALL.replace('f', 'g')}", ["f"]),  # the rest is reasoning
        (f"reasoning opened by the template {CALL}</think>\n\n{CALL.replace('f', 'g')}", ["g"]),
        (f"<think>\nplan\n</think>\n\n{CALL}", ["f"]),
        ('<think>x</think>\n{"name": "f", "arguments": {}}', ["f"]),  # a bare call after reasoning
        ('<think>{"name": "g", "arguments": {}}</think>The answer.', []),
        ('<think>\n\n</think>\n\n```json\n[{"name": "f", "arguments": {}}]\n```', ["f"]),
    ],
)
def test_calls_inside_reasoning_do_not_run(text, names):
    assert [c.name for c in parse_tool_calls(text)] == names
    assert has_tool_call(text) == ("<tool_call>" in text and bool(names))


def test_plan_turn_ends_a_turn_whose_only_calls_are_reasoning():
    from swift_rlfactory.rollout.episode import plan_turn

    assert plan_turn(f"<think>{CALL}</think>It is 4.", turn=1, max_turns=4).stop_reason == "answer"
    assert [c.name for c in plan_turn(f"<think>hm</think>{CALL}", turn=1, max_turns=4).calls] == ["f"]
