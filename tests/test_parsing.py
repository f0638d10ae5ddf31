"""Tool-call parsing: hermes blocks, near-JSON repair, fences, and errors as values."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swift_rlfactory.tools.calls import hermes_call, parse_tool_calls
from swift_rlfactory.tools.calls.scanner import has_tool_call


def test_hermes_block_with_surrounding_text():
    text = 'Let me compute.\n<tool_call>\n{"name": "calculate", "arguments": {"expression": "3*4"}}\n</tool_call>'
    [call] = parse_tool_calls(text)
    assert (call.name, call.arguments, call.error) == ("calculate", {"expression": "3*4"}, None)


def test_written_hermes_calls_read_back_as_written():
    arguments = {"city": "Zürich", "filters": {"stars": [4, 5]}, "note": 'say "hi"'}
    text = "\n".join([hermes_call("search", arguments), hermes_call("book", {})])
    assert text.startswith('<tool_call>\n{"name": "search", "arguments": {"city": "Zürich", ')
    parsed = [(c.name, c.arguments, c.error) for c in parse_tool_calls(text)]
    assert parsed == [("search", arguments, None), ("book", {}, None)]


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


# -- a key written twice, a name with outer white space, calls past the turn's limit ------------------
@pytest.mark.parametrize(
    "body, key",
    [
        ('{"name": "a", "name": "b", "arguments": {}}', "name"),
        ('{"name": "s", "arguments": {"q": "x", "q": "y"}}', "q"),
        ('{"name": "s", "arguments": {"o": {"k": 1, "k": 2}}}', "k"),  # nested
        ("{'name': 's', 'arguments': {'q': 'x', 'q': 'y',}}", "q"),  # near-JSON: the repairing path
        ('{"name": "s", "arguments": "{\\"q\\": \\"x\\", \\"q\\": \\"y\\"}"}', "q"),  # arguments as a string
        ('[{"name": "s", "arguments": {}}, {"name": "t", "arguments": {"q": 1, "q": 1}}]', "q"),
    ],
)
def test_a_key_written_twice_is_an_error_call_naming_it(body, key):
    calls = parse_tool_calls(f"<tool_call>{body}</tool_call>")
    assert calls and all(call.error is not None for call in calls[-1:])
    assert f'"{key}" is written twice' in calls[-1].error


def test_a_bare_reply_with_a_key_written_twice_is_no_call():
    assert parse_tool_calls('{"name": "a", "name": "b", "arguments": {}}') == []


@pytest.mark.parametrize("name", [" search ", "\tsearch\n", "search "])
def test_a_tool_name_with_outer_white_space_is_the_tool(name):
    [call] = parse_tool_calls(block(json.dumps({"name": name, "arguments": {"q": "x"}})))
    assert (call.name, call.arguments, call.error) == ("search", {"q": "x"}, None)


def test_calls_past_the_turn_limit_are_refused_as_limit_not_as_parse_failures():
    from swift_rlfactory.rollout.episode import plan_turn

    text = CALL * 3 + block("{broken")
    plan = plan_turn(text, turn=1, max_turns=4, max_calls_per_turn=2)
    assert [c.error is None for c in plan.calls] == [True, True, False, False]
    assert [c.error_kind for c in plan.calls[2:]] == ["limit", "limit"]  # the broken one too: never read
    assert "too many tool calls in one turn (limit 2)" in plan.calls[2].error


# -- Qwen3-Coder / Qwen3.5 XML calls ------------------------------------------------------------------
XML_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "top_k": {"type": "integer"},
                    "exact": {"type": "boolean"},
                    "filters": {"type": "object"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "note": {"type": ["string", "null"]},
                    "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                },
            },
        },
    }
]


def xml(text: str, tools=XML_TOOLS):
    from swift_rlfactory.tools.calls import parse_xml_tool_calls

    return parse_xml_tool_calls(text, tools)


def xml_call(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def test_plan_turn_reads_xml_calls_in_the_format_the_prompt_asked_for():
    from swift_rlfactory.rollout.episode import plan_turn
    from swift_rlfactory.tools.calls import call_parser

    text = "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n</function>\n</tool_call>"
    plan = plan_turn(text, 1, 4, parse=call_parser("qwen3_coder", XML_TOOLS))
    assert [(c.name, c.arguments, c.error) for c in plan.calls] == [("search", {"query": "x"}, None)]
    assert plan_turn(text, 1, 4).calls[0].error is not None  # hermes stays hermes: the format is chosen


@pytest.mark.parametrize(
    "params, arguments",
    [
        ({"query": "capital of France"}, {"query": "capital of France"}),
        ({"top_k": "3"}, {"top_k": 3}),  # typed by the schema
        ({"top_k": "three"}, {"top_k": "three"}),  # not JSON: the tool's own check judges it
        ({"exact": "true"}, {"exact": True}),
        ({"filters": '{"year": 2020}'}, {"filters": {"year": 2020}}),
        ({"tags": '["a", "b"]'}, {"tags": ["a", "b"]}),
        ({"query": "42"}, {"query": "42"}),  # a string parameter stays text, JSON-looking or not
        ({"query": '{"a": 1}'}, {"query": '{"a": 1}'}),
        ({"note": "null"}, {"note": None}),  # string or null
        ({"limit": "5"}, {"limit": 5}),  # anyOf branches
        ({"unknown": "7"}, {"unknown": "7"}),  # not in the schema: text
        ({"query": "  two\n  lines  "}, {"query": "  two\n  lines  "}),  # only the layout newlines go
        ({"query": "a </tool_call> b"}, {"query": "a </tool_call> b"}),  # the tag inside a value is text
        ({"query": "<b>北京</b> & <think>"}, {"query": "<b>北京</b> & <think>"}),
        ({"query": "a </think> b"}, {"query": "a </think> b"}),
    ],
)
def test_xml_parameters_are_raw_text_typed_by_the_schema(params, arguments):
    [call] = xml(xml_call("search", **params))
    assert (call.name, call.arguments, call.error) == ("search", arguments, None)


@pytest.mark.parametrize(
    "text, names",
    [
        ("<tool_call><function=search><parameter=query>x</parameter></function></tool_call>", ["search"]),
        ("<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n</tool_call>", ["search"]),
        ("<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n</function>", ["search"]),
        ("<tool_call><function=a></function><function=b></function></tool_call>", ["a", "b"]),
        (xml_call("a") + "\n" + xml_call("b"), ["a", "b"]),
        ("I will search.\n\n" + xml_call(" search ", query="x"), ["search"]),  # name stripped
        ("<function=search>\n<parameter=query>\nx\n</parameter>\n</function>", ["search"]),  # no block
        (f"<think>{xml_call('a')}</think>The answer is 4.", []),
        (f"<think>hm</think>{xml_call('a')}", ["a"]),
        ("The answer is <b>4</b>.", []),
    ],
)
def test_xml_calls_are_found_where_the_model_writes_them(text, names):
    calls = xml(text)
    assert [c.name for c in calls] == names and all(c.error is None for c in calls)


@pytest.mark.parametrize(
    "text, message",
    [
        ('<tool_call>\n{"name": "search", "arguments": {}}\n</tool_call>', "expected <function=NAME>"),
        ("<tool_call>\n</tool_call>", "empty <tool_call> block"),
        ("<tool_call><function=s><parameter=q>\nx\n</function></tool_call>", '"q" is never closed'),
        ("<tool_call><function=s><parameter=q>x</parameter><parameter=q>y</parameter></function>", "twice"),
        ("<tool_call><function=s>query: x</function></tool_call>", "unexpected text in <function=s>"),
        ("<tool_call><function=s></function> and more</tool_call>", "unexpected text after </function>"),
        ('<tool_call><function=search><parameter=filters>{"a": 1, "a": 2}</parameter></function>', "twice"),
        ("<tool_call><function= ><parameter=q>x</parameter></function></tool_call>", '"name" must be'),
        ("<tool_call><function=search><parameter=top_k>1e400</parameter></function>", "out of range"),
    ],
)
def test_unreadable_xml_calls_are_error_calls_never_answers(text, message):
    calls = xml(text)
    assert calls and calls[0].error is not None and message in calls[0].error, calls


def test_a_broken_xml_block_does_not_swallow_the_next_one():
    text = "<tool_call><function=a><parameter=q>never closed</tool_call>" + xml_call("b", q="y")
    [broken, good] = xml(text)
    assert broken.error is not None and (good.name, good.arguments, good.error) == ("b", {"q": "y"}, None)


def test_xml_parsing_never_raises_on_fragments():
    pieces = ["<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>",
              ">", "\n", "x", "<think>", "</think>", '{"a": 1}']  # fmt: skip
    import itertools

    for combo in itertools.product(pieces, repeat=3):
        xml("".join(combo))


_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,20}", fullmatch=True)
_PIECES = ["<", ">", "\n", "北京", "{", '"', "</function>", "<parameter=x>", "null", "</think>", "  "]
_TEXT = (
    st.lists(
        st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
        | st.sampled_from(_PIECES),
        max_size=8,
    )
    .map("".join)
    .filter(lambda v: "</parameter>" not in v and "<tool_call>" not in v)
)
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(
    name=_NAME,
    texts=st.dictionaries(
        _NAME, _TEXT | st.from_regex(r'\s*[\[{"]?\d+[\]}"]?\s*', fullmatch=True), max_size=4
    ),
    values=st.dictionaries(
        _NAME.map(lambda k: "j_" + k), _JSONISH.filter(lambda v: not isinstance(v, str)), max_size=3
    ),
)
def test_xml_calls_rendered_by_ms_swift_read_back_exactly(name, texts, values):
    """Whatever ms-swift's qwen3_coder template renders for a call (the text the model is trained on) is
    that call: string parameters unchanged, other types back as their JSON values."""
    from swift.agent_template import agent_template_map

    arguments = {**texts, **values}
    properties = {k: {"type": "string"} for k in texts} | {
        k: {"type": ["object", "array", "integer", "boolean", "null"]} for k in values
    }
    tools = [{"name": name, "parameters": {"type": "object", "properties": properties}}]
    message = {"role": "tool_call", "content": json.dumps({"name": name, "arguments": arguments})}
    rendered = agent_template_map["qwen3_coder"]()._format_tool_calls([message])
    [call] = xml(f"Let me look.\n\n{rendered}", tools)
    assert (call.name, call.arguments, call.error) == (name, arguments, None)


# -- the prompt's agent template and the parser agree, for every ms-swift agent template -------------
def _agent_templates():
    from swift.agent_template import agent_template_map

    return sorted(agent_template_map)


@pytest.mark.parametrize("name", _agent_templates())
def test_every_ms_swift_agent_template_is_parsed_in_its_own_format_or_refused(name):
    """Either a call rendered in the template's own format (what the model is trained and told to write)
    reads back as that call, or start-up refuses the template, naming it and the supported ones."""
    from swift.agent_template import agent_template_map

    from swift_rlfactory.adapters.swift_template import CALL_FORMAT_OF, TemplateByName, call_format
    from swift_rlfactory.tools.calls import call_parser

    agent = agent_template_map[name]()
    template = TemplateByName(template_meta=None, agent_template=agent)
    try:
        found = call_format(template)
    except ValueError as exc:
        assert repr(name) in str(exc) and all(ok in str(exc) for ok in CALL_FORMAT_OF)
        return
    arguments = {"query": "capital of 法国 <b>", "n": 3, "opts": {"exact": True}}
    tools = [
        {
            "name": "search",
            "description": "Search.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "n": {"type": "integer"},
                    "opts": {"type": "object"},
                },
            },
        }
    ]
    message = {"role": "tool_call", "content": json.dumps({"name": "search", "arguments": arguments})}
    rendered = agent._format_tool_calls([message])
    [call] = call_parser(found, tools)(rendered)
    assert (call.name, call.arguments, call.error) == ("search", arguments, None)
    # the tools prompt of the template asks for what was parsed: its example call is in that format
    user = {"role": "user", "content": "Hi"}  # some templates (Llama's) write the tools into it
    shown = agent._format_tools(tools, "Be brief.", user) + user["content"]
    assert ("<function=" in shown) == (found == "qwen3_coder") or found.startswith(
        "ms-swift:"
    )  # its own reader


@pytest.mark.parametrize(
    "name",
    ["mistral", "deepseek_v3_1", "glm4_5", "glm4_7", "kimi_k25", "minimax_m2", "hunyuan_hermes", "react_en"],
)
def test_templates_whose_calls_hermes_would_read_as_answers_are_read_by_their_own_reader_or_refused(name):
    """Read by the template's own ``get_toolcall`` in training and local eval; refused where calls come back
    structured and are written as hermes (a served model)."""
    from swift.agent_template import agent_template_map

    from swift_rlfactory.adapters.swift_template import TemplateByName, call_format

    template = TemplateByName(template_meta=None, agent_template=agent_template_map[name]())
    assert call_format(template) == f"ms-swift:{name}"
    with pytest.raises(ValueError, match=f"agent template '{name}'"):
        call_format(template, swift_reader=False)


@pytest.mark.parametrize(
    "template_type, found",
    [(None, "hermes"), ("qwen3", "hermes"), ("qwen2_5", "hermes"), ("qwen3_5", "qwen3_coder")],
)
def test_call_format_of_ms_swift_templates_by_name(template_type, found):
    from swift_rlfactory.adapters.swift_template import call_format, template_by_name

    assert call_format(template_by_name(template_type)) == found


# -- a call object written outside the format's blocks (Llama's prose, then the JSON) ---------------------
PROSE_TOOLS = [
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}}}},
    {"name": "now", "description": "The time; no parameters."},
]  # fmt: skip


@pytest.mark.parametrize(
    "text, calls",
    [
        (
            'Let me look that up.\n{"name": "search", "parameters": {"query": "x"}}',
            [("search", {"query": "x"})],
        ),
        (
            'Let me look that up.\n{"name": "search", "arguments": {"query": "x"}}',
            [("search", {"query": "x"})],
        ),
        (
            '<|python_tag|>{"name": "search", "parameters": {"query": "x"}}<|eom_id|>',
            [("search", {"query": "x"})],
        ),
        ('{"type": "function", "name": "now", "parameters": {}}', [("now", {})]),
        (
            "Sure. {'name': 'search', 'parameters': {'query': 'x',},}",
            [("search", {"query": "x"})],
        ),  # repaired
        (
            'Two: {"name": "search", "parameters": {"query": "a"}}; {"name": "now", "parameters": {}}',
            [("search", {"query": "a"}), ("now", {})],
        ),
        (
            '{"name": "search", "parameters": {"query": "a"}}\nI will wait for it.',
            [("search", {"query": "a"})],
        ),
        ('<think>{"name": "now", "parameters": {}}</think>Looking: {"name": "search"}', [("search", {})]),
        # key order is the model's: "name" after the arguments, after prose too (it was found only alone)
        ('Sure: {"parameters": {"query": "x"}, "name": "search"}', [("search", {"query": "x"})]),
        (
            'A: {"type": "function", "arguments": {}, "name": "now"} {"parameters": {}, "name": "nope"}',
            [("now", {})],
        ),  # an object naming no tool offered stays prose
        # a literal <tool_call> in an argument is argument text, not a hermes block
        (
            '{"name": "search", "parameters": {"query": "what is <tool_call>?"}}',
            [("search", {"query": "what is <tool_call>?"})],
        ),
        (
            'Looking: {"name": "search", "parameters": {"query": "<tool_call>x</tool_call>"}}',
            [("search", {"query": "<tool_call>x</tool_call>"})],
        ),
    ],
)
def test_llama_calls_after_prose_are_calls(text, calls):
    from swift_rlfactory.rollout.episode import plan_turn
    from swift_rlfactory.tools.calls import call_parser

    plan = plan_turn(text, 1, 4, parse=call_parser("llama3_json", PROSE_TOOLS))
    assert not plan.finished
    assert [(c.name, c.arguments, c.error) for c in plan.calls] == [(n, a, None) for n, a in calls]


@pytest.mark.parametrize(
    "call_format, shows",
    [("hermes", '<tool_call>{"name": "search", "arguments": {...}}</tool_call>'),
     ("qwen3_coder", "<tool_call><function=search><parameter=NAME>")],
)  # fmt: skip
@pytest.mark.parametrize(
    "text",
    [
        'Let me look that up.\n{"name": "search", "parameters": {"query": "x"}}',
        '<|python_tag|>{"name": "search", "arguments": {"query": "x"}}',
        'Let me look that up. {"name": " search ", "query": "x"}',  # and a key out of place
    ],
)
def test_a_call_object_outside_the_format_is_an_error_showing_it_never_an_answer(call_format, shows, text):
    from swift_rlfactory.rollout.episode import plan_turn
    from swift_rlfactory.tools.calls import call_parser

    plan = plan_turn(text, 1, 4, parse=call_parser(call_format, PROSE_TOOLS))
    [call] = plan.calls
    assert not plan.finished and call.name == "search" and shows in call.error and "did not run" in call.error
    assert "\n" not in call.error


def test_a_bare_call_object_is_an_error_in_the_xml_format():
    from swift_rlfactory.tools.calls import call_parser

    [call] = call_parser("qwen3_coder", PROSE_TOOLS)('{"name": "search", "arguments": {"query": "x"}}')
    assert "<function=search>" in call.error


@pytest.mark.parametrize("call_format", ["hermes", "llama3_json", "qwen3_coder"])
@pytest.mark.parametrize(
    "text",
    [
        'The record is {"name": "Bob", "age": 3}. <answer>Bob</answer>',  # no tool of that name
        'In JSON: {"query": "search", "name": 3}. <answer>3</answer>',
        "<answer>search</answer>",
        '<think>{"name": "search", "parameters": {"query": "x"}}</think><answer>4</answer>',  # reasoning
    ],
)
def test_prose_that_only_mentions_json_stays_an_answer(call_format, text):
    from swift_rlfactory.rollout.episode import plan_turn
    from swift_rlfactory.tools.calls import call_parser

    assert plan_turn(text, 1, 4, parse=call_parser(call_format, PROSE_TOOLS)).stop_reason == "answer"


@pytest.mark.parametrize("call_format", ["hermes", "llama3_json"])
def test_tagged_hermes_blocks_read_as_before_in_both_json_formats(call_format):
    from swift_rlfactory.tools.calls import call_parser

    text = 'Searching.\n<tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n</tool_call>'
    [call] = call_parser(call_format, PROSE_TOOLS)(text)
    assert (call.name, call.arguments, call.error) == ("search", {"query": "x"}, None)


def test_a_broken_call_object_after_prose_is_an_error_call_and_ends_the_search():
    from swift_rlfactory.tools.calls import call_parser

    parse = call_parser("llama3_json", PROSE_TOOLS)
    text = 'Go: {"name": "search", "parameters": {"query": x}} and {"name": "now", "parameters": {}}'
    [call] = parse(text)
    assert call.name == "search" and "not valid JSON" in call.error


@pytest.mark.parametrize("template_type", ["llama3", "llama3_2", "llama4"])
def test_llama_templates_read_llama_calls(template_type):
    from swift_rlfactory.adapters.swift_template import call_format, template_by_name

    assert call_format(template_by_name(template_type)) == "llama3_json"


def test_xml_calls_after_prose_without_tags_are_calls_when_they_name_an_offered_tool():
    """vLLM's reader finds them there too; before, the turn ended as an answer."""
    parse = call_parser_for("qwen3_coder")
    call = "<function=search>\n<parameter=query>\nx\n</parameter>\n</function>"
    assert [(c.name, c.arguments, c.error) for c in parse(f"I will search.\n{call}")] == [
        ("search", {"query": "x"}, None)
    ]
    [after] = parse(f"I will search.\n{call}\nThen answer.")  # text after it would be lost: refused
    assert "unexpected text after </function>" in after.error
    assert parse("Tags look like <function=NAME>. <answer>x</answer>") == []  # no tool of that name


@pytest.mark.parametrize("text", ['<|python_tag|>search.call(query="x")', "<|python_tag|>"])
def test_a_python_tag_without_a_json_call_is_an_error_call(text):
    [call] = call_parser_for("llama3_json")(text)
    assert '{"name": NAME, "parameters": {...}}' in call.error


def call_parser_for(call_format: str):
    from swift_rlfactory.tools.calls import call_parser

    return call_parser(call_format, PROSE_TOOLS)


# -- the same cases in every format: what the model wrote reaches the tool unchanged ------------------
def written(call_format: str, name: str, arguments: dict) -> str:
    """One call as the format's prompt asks for it."""
    if call_format == "qwen3_coder":
        params = "".join(
            f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}\n</parameter>\n"
            for k, v in arguments.items()
        )
        return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"
    if call_format == "llama3_json":
        return json.dumps({"name": name, "parameters": arguments}, ensure_ascii=False)
    return (
        f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"
    )


CASE_TOOLS = [
    {"name": "search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}},
    {"name": "run", "parameters": {"type": "object", "properties": {"code": {"type": "string"},
                                                                     "opts": {"type": "object"}}}},
]  # fmt: skip
FORMATS = ["hermes", "llama3_json", "qwen3_coder"]


@pytest.mark.parametrize("call_format", FORMATS)
@pytest.mark.parametrize(
    "name, arguments",
    [
        ("search", {"query": "北京的人口 😀 naïve Ωμέγα"}),  # unicode
        ("search", {"query": 'a "quoted" \\ back\\slash\ttab\nnewline'}),
        ("run", {"code": 'print(json.dumps({"a": [1, {"b": "</tool_call>"}]}))'}),  # nested JSON, a tag
        ("run", {"code": 'x = \'{"name": "search", "arguments": {}}\''}),  # a call inside a string
        ("run", {"opts": {"deep": {"er": [1, 2.5, None, True]}}, "code": ""}),  # nested object
    ],
)
def test_every_format_reads_its_own_call_back_exactly(call_format, name, arguments):
    from swift_rlfactory.tools.calls import call_parser

    text = f"Let me do that.\n{written(call_format, name, arguments)}"
    calls = call_parser(call_format, CASE_TOOLS)(text)
    assert [(c.name, c.arguments, c.error) for c in calls] == [(name, arguments, None)]


@pytest.mark.parametrize("call_format", FORMATS)
def test_every_format_reads_several_calls_of_one_turn_in_order(call_format):
    from swift_rlfactory.tools.calls import call_parser

    args = [{"query": q} for q in ("a", "β", "c d")]
    text = "Three searches:\n" + "\n".join(written(call_format, "search", a) for a in args)
    calls = call_parser(call_format, CASE_TOOLS)(text)
    assert [(c.name, c.arguments, c.error) for c in calls] == [("search", a, None) for a in args]


@pytest.mark.parametrize("call_format", FORMATS)
def test_every_format_ignores_calls_in_reasoning(call_format):
    from swift_rlfactory.rollout.episode import plan_turn
    from swift_rlfactory.tools.calls import call_parser

    parse = call_parser(call_format, CASE_TOOLS)
    thought = written(call_format, "search", {"query": "considered"})
    assert plan_turn(f"<think>{thought}</think><answer>4</answer>", 1, 4, parse=parse).stop_reason == "answer"
    assert plan_turn(f"<think>{thought}", 1, 4, parse=parse).stop_reason == "answer"  # never closed
    [call] = plan_turn(f"<think>{thought}</think>{written(call_format, 'search', {'query': 'q'})}", 1, 4,
                       parse=parse).calls  # fmt: skip
    assert call.arguments == {"query": "q"}


@pytest.mark.parametrize("call_format", FORMATS)
def test_a_call_cut_at_max_tokens_never_runs(call_format):
    from swift_rlfactory.rollout.episode import plan_turn
    from swift_rlfactory.tools.calls import call_parser

    parse = call_parser(call_format, CASE_TOOLS)
    whole = written(call_format, "search", {"query": "capital of France"})
    for cut in range(1, len(whole)):
        plan = plan_turn(whole[:cut], 1, 4, finish_reason="length", parse=parse)
        assert plan.stop_reason == "length" and not plan.calls
        for call in parse(whole[:cut]):  # read without the finish reason: never a value not written
            assert call.error is not None or call.arguments in ({}, {"query": "capital of France"}), whole[
                :cut
            ]


@pytest.mark.parametrize(
    "text, arguments",
    [
        (
            "{'name': 'search', 'arguments': {'query': 'it\\'s',},}",
            {"query": "it's"},
        ),  # single quotes, commas
        ('{"name": " search\\t", "arguments": {"query": "x"}}', {"query": "x"}),  # name with white space
        (
            '{"name": "search", "arguments": "{\\"query\\": \\"{\\\\\\"a\\\\\\": 1}\\"}"}',
            {"query": '{"a": 1}'},
        ),
        ('{"name": "search", "arguments": "{\'query\': \'x\',}"}', {"query": "x"}),  # a near-JSON string
        ('{"name": "search", "arguments": {"query": "x" /* why */}}', {"query": "x"}),
    ],
)
@pytest.mark.parametrize("where", ["<tool_call>{}</tool_call>", "Looking it up: {}"])
def test_near_json_calls_are_repaired_in_blocks_and_in_llama_prose(text, arguments, where):
    from swift_rlfactory.tools.calls import call_parser

    call_format = "hermes" if where.startswith("<tool_call>") else "llama3_json"
    [call] = call_parser(call_format, CASE_TOOLS)(where.format(text))
    assert (call.name, call.arguments, call.error) == ("search", arguments, None)


@pytest.mark.parametrize("tools", [5, "search", {"name": "search"}, [None, 3, "x"]])
def test_xml_calls_of_a_row_whose_tools_are_not_schemas_run_untyped(tools):
    """A dataset row's ``tools`` may hold anything: the call is read, its values stay text."""
    from swift_rlfactory.tools.calls import call_parser

    [call] = call_parser("qwen3_coder", tools)(xml_call("search", top_k="3"))
    assert (call.name, call.arguments, call.error) == ("search", {"top_k": "3"}, None)


def test_xml_call_values_are_typed_by_parameters_written_as_a_json_string():
    """ms-swift accepts a tool's ``parameters`` as a JSON string; its types still apply."""
    import json

    [schema] = XML_TOOLS
    as_text = [
        {
            **schema,
            "function": {**schema["function"], "parameters": json.dumps(schema["function"]["parameters"])},
        }
    ]
    [call] = xml(xml_call("search", top_k="3", exact="true"), as_text)
    assert call.arguments == {"top_k": 3, "exact": True}


def test_xml_call_values_are_typed_through_the_refs_pydantic_writes_for_models_and_enums():
    """A model or enum parameter is ``{"$ref": "#/$defs/..."}`` in the schema pydantic derives (for our
    Python tools as for FastMCP servers): its JSON reaches the tool as the object it spells, so a Python
    tool taking a model runs instead of refusing the text of an object."""
    import asyncio
    import enum

    from pydantic import BaseModel

    from swift_rlfactory.tools.python_tool import PythonTool

    class Where(BaseModel):
        city: str
        days: int = 1

    class Unit(enum.Enum):
        C = "c"
        F = "f"

    def forecast(where: Where, unit: Unit = Unit.C, backup: Where | None = None) -> str:
        """The forecast for a place."""
        return f"{where.city} {where.days} {unit.value} {backup and backup.city}"

    tool = PythonTool(forecast)
    assert "$ref" in json.dumps(tool.spec.parameters["properties"])  # the schema under test
    text = xml_call("forecast", where='{"city": "Paris", "days": 2}', unit="c", backup='{"city": "Lyon"}')
    [call] = xml(text, [tool.spec.openai_schema()])
    assert call.arguments == {"where": {"city": "Paris", "days": 2}, "unit": "c", "backup": {"city": "Lyon"}}
    assert asyncio.run(tool.call(call.arguments)) == "Paris 2 c Lyon"


@pytest.mark.parametrize(
    "ref", ["#/$defs/Node", "#/$defs/Missing", "https://example.com/node.json", "#/properties/x/0"]
)
def test_xml_values_whose_ref_leads_nowhere_or_back_to_itself_stay_text(ref):
    """A recursive, dangling or remote reference gives no type: the value stays text, nothing raises."""
    parameters = {
        "type": "object",
        "properties": {"x": {"$ref": ref}},
        "$defs": {"Node": {"anyOf": [{"$ref": "#/$defs/Node"}, {"$ref": ref}]}},
    }
    tools = [{"type": "function", "function": {"name": "f", "parameters": parameters}}]
    [call] = xml(xml_call("f", x="[1]"), tools)
    assert call.arguments == {"x": "[1]"}


def test_an_xml_value_whose_ref_is_the_schema_root_is_typed_by_the_root():
    """``{"$ref": "#"}`` is the whole parameters schema (zod-to-json-schema's recursive root, a tree whose
    children are trees): an object, so its JSON is an object however deep, not the text of it."""
    parameters = {
        "type": "object",
        "properties": {
            "label": {"type": "string"},
            "child": {"$ref": "#"},
            "children": {"type": "array", "items": {"$ref": "#"}},
        },
    }
    tools = [{"type": "function", "function": {"name": "tree", "parameters": parameters}}]
    child = '{"label": "b", "child": {"label": "c"}}'
    [call] = xml(xml_call("tree", label="a", child=child, children='[{"label": "d"}]'), tools)
    assert call.arguments == {
        "label": "a",
        "child": {"label": "b", "child": {"label": "c"}},
        "children": [{"label": "d"}],
    }


@pytest.mark.parametrize(
    "call_format, text, visible, runs",
    [
        # a call considered in reasoning the prompt opened, its string holding the tag: still reasoning
        ("hermes", 'plan {"name": "run", "arguments": {"code": "</think>"}} no.</think>\nIt is 4.', "\nIt is 4.", []),
        ("hermes", 'plan {"name": "run", "arguments": {}} then</think>\nIt is 4.', "\nIt is 4.", []),
        ("llama3_json", '{"name": "run", "parameters": {}} and</think>\nIt is 4.', "\nIt is 4.", []),
        # in a think block the model opened, the first </think> ends it, wherever it stands (as before)
        ("hermes", '<think>{"name": "run", "arguments": {"code": "</think>"}} no</think>It is 4.',
         '"}} no</think>It is 4.', []),
        # a think tag after a call has ended opens reasoning
        ("llama3_json", 'Run: {"name": "run", "parameters": {}}<think>{"name": "search", "parameters": {}}',
         'Run: {"name": "run", "parameters": {}}', ["run"]),
        ("qwen3_coder", "<function=run><parameter=code>x</parameter></function><think>aside</think>",
         "<function=run><parameter=code>x</parameter></function>", ["run"]),
    ],
)  # fmt: skip
def test_a_think_tag_outside_any_call_is_still_reasoning(call_format, text, visible, runs):
    """Only a tag inside a call's argument is text: one in prose, or after a call has ended, still opens
    or closes reasoning, and calls in that reasoning do not run."""
    from swift_rlfactory.tools.calls import call_parser, read_reply

    assert read_reply(text).visible == visible
    calls = call_parser(call_format, CASE_TOOLS)(text)
    assert [c.name for c in calls if c.error is None] == runs


THINK_TAG_CODE = [
    "print('</think>')",
    "s = '</think>'\nprint(s.upper())",
    "print('<think>')",
    "'<think>a</think>'",
]
BLOCK_TAG_CODE = [
    "print('<tool_call>')",
    "print('</tool_call>')",
    "'<tool_call>x</tool_call>'",
    "'<tool_call>{}'",
]


@pytest.mark.parametrize("call_format", FORMATS)
@pytest.mark.parametrize("reasoning", ["", "<think>plan</think>\n", "plan opened by the template</think>\n"])
@pytest.mark.parametrize("code", [*THINK_TAG_CODE, *BLOCK_TAG_CODE])
def test_a_tag_in_an_untagged_call_reaches_the_tool(call_format, reasoning, code):
    """A think tag or a ``<tool_call>`` inside a call's argument (a JSON string, an XML value) is argument
    text, whether or not reasoning comes first. Before, a reply that was nothing but the call lost it: its
    ``</think>`` was taken for the end of reasoning the prompt opened, a ``<think>`` opened reasoning never
    closed, and a ``<tool_call>`` opened a block mid-string (an error call); after reasoning,
    ``<think>a</think>`` was cut out of the argument."""
    from swift_rlfactory.tools.calls import call_parser, read_reply

    call = written(call_format, "run", {"code": code})
    untagged = call.removeprefix("<tool_call>").removesuffix("</tool_call>").strip()
    calls = call_parser(call_format, CASE_TOOLS)(reasoning + untagged)
    assert [(c.name, c.arguments, c.error) for c in calls] == [("run", {"code": code}, None)]
    reply = read_reply(reasoning + untagged)
    assert (reply.visible.strip(), reply.writes_call) == (untagged, True)


@pytest.mark.parametrize("call_format", FORMATS)
@pytest.mark.parametrize("before", ["", "Let me run it. ", "<think>plan</think>\nLet me run it. "])
@pytest.mark.parametrize("code", ["print('</think>')", "print('<think>')", *BLOCK_TAG_CODE])
def test_a_json_call_whose_string_holds_a_tag_is_a_call_in_every_format(call_format, before, code):
    """Llama's call after prose runs; where the format does not read it there (hermes after prose, any JSON
    for ``qwen3_coder``) it is the error call that names the tool and shows the format, as without the
    tag. Before, the call was lost and the turn ended as an answer, or a block opened mid-string and the
    error quoted the rest of the string."""
    from swift_rlfactory.tools.calls import call_parser

    text = before + json.dumps({"name": "run", "parameters": {"code": code}})
    [call] = call_parser(call_format, CASE_TOOLS)(text)
    if call_format == "llama3_json" or call_format == "hermes" and not before:
        assert (call.name, call.arguments, call.error) == ("run", {"code": code}, None)
    else:
        assert call.name == "run" and "must be written as" in call.error, call.error


@pytest.mark.parametrize("call_format", FORMATS)
@pytest.mark.parametrize("tagged", [True, False])
@pytest.mark.parametrize("code", [*BLOCK_TAG_CODE, "print('</think>')"])
def test_only_the_second_call_holding_a_tag_keeps_both_calls(call_format, tagged, code):
    """Several calls in one reply, the tag in the second one's argument: both run, in order."""
    from swift_rlfactory.tools.calls import call_parser

    written_calls = [
        written(call_format, "search", {"query": "a"}),
        written(call_format, "run", {"code": code}),
    ]
    if not tagged:
        written_calls = [
            c.removeprefix("<tool_call>").removesuffix("</tool_call>").strip() for c in written_calls
        ]
    calls = call_parser(call_format, CASE_TOOLS)("\n".join(written_calls))
    expected = [("search", {"query": "a"}, None), ("run", {"code": code}, None)]
    assert [(c.name, c.arguments, c.error) for c in calls] == expected


def test_a_block_tag_in_an_xml_value_is_text_but_a_call_after_a_value_never_closed_is_a_call():
    """Inside ``<tool_call>``, a ``<tool_call>`` in a value is the value's text (code that prints the tag),
    unless a ``<function=`` follows it: then it opens the next call, and the value before it was never
    closed. Before, any ``<tool_call>`` in a value made it "never closed"."""
    code = "print('<tool_call>')\nprint(\"<tool_call> x\")"
    [call] = xml(xml_call("search", query=code))
    assert (call.name, call.arguments, call.error) == ("search", {"query": code}, None)
    cut = "<tool_call><function=a><parameter=q>cut " + xml_call("b", q="y")  # <tool_call>\n<function=b>
    broken, good = xml(cut)
    assert "never closed" in broken.error
    assert (good.name, good.arguments, good.error) == ("b", {"q": "y"}, None)


@pytest.mark.parametrize(
    "call_format, text, runs",
    [
        # a block after a call has ended, and after a call object that is never complete, is a block
        ("hermes", 'Run {"name": "run", "arguments": {}} <tool_call>{"name": "search", "arguments": {}}',
         ["search"]),
        ("hermes", '{"name": "run", "arguments": {"code": "x <tool_call>{"name": "search", "arguments": {}}',
         ["search"]),
        ("qwen3_coder", "<function=run><parameter=code>x</parameter></function>\n"
         "<tool_call><function=search><parameter=query>y</parameter></function></tool_call>", ["search"]),
        # an XML call's opening tags never are a value's text: prose that shows <parameter=x> stays prose
        ("qwen3_coder", "Write <parameter=x> inside: <tool_call>\n<function=search>\n<parameter=query>\ny\n"
         "</parameter>\n</function>\n</tool_call>", ["search"]),
    ],
)  # fmt: skip
def test_a_block_tag_outside_any_call_still_opens_a_block(call_format, text, runs):
    """Only a tag inside an argument that reads whole across it is text."""
    from swift_rlfactory.tools.calls import call_parser, read_reply

    calls = call_parser(call_format, CASE_TOOLS)(text)
    assert [c.name for c in calls if c.error is None] == runs
    assert read_reply(text).writes_call


@pytest.mark.parametrize(
    "value, query",
    [
        ("\r\nx\r\n", "x"),  # CRLF layout: both layout newlines go, as with \n
        ("\r\nline 1\r\nline 2\r\n", "line 1\r\nline 2"),
        ("\nx\r\n", "x\r"),  # \n layout: a value that ends in \r keeps it (ms-swift renders it so)
        ("\n\r\nx\n", "\r\nx"),
    ],
)
def test_xml_values_lose_the_layout_newlines_whether_lf_or_crlf(value, query):
    """The newline after ``<parameter=...>`` says how the layout is written; before, a CRLF layout left
    ``"\\r\\nx\\r"`` for ``x``."""
    [call] = xml(f"<tool_call>\r\n<function=search>\r\n<parameter=query>{value}</parameter>\r\n</function>")
    assert (call.name, call.arguments, call.error) == ("search", {"query": query}, None)


@pytest.mark.parametrize("times", [2, 3])
@pytest.mark.parametrize("key", ["arguments", "parameters"])
def test_arguments_json_encoded_more_than_once_are_read(times, key):
    """A string of a string of the object (a dataset's tool calls dumped twice) still holds one object,
    and no other reading of it exists; before, the call was refused as "must be a JSON object"."""
    arguments = {"query": 'say "hi"\n'}
    encoded = arguments
    for _ in range(times):
        encoded = json.dumps(encoded)
    [call] = parse_tool_calls(block(json.dumps({"name": "search", key: encoded})))
    assert (call.name, call.arguments, call.error) == ("search", arguments, None)


@pytest.mark.parametrize(
    "body, message",
    [
        ('{"name": "f", "parameters": [1]}', '"parameters" must be a JSON object'),
        ('{"name": "f", "parameters": "x y"}', '"parameters" is a string that is not one JSON object'),
        ('{"name": "f", "arguments": "\\"x y\\""}', '"arguments" is a string that is not one JSON object'),
    ],
)
def test_an_error_about_the_arguments_names_the_key_the_model_wrote(body, message):
    [call] = parse_tool_calls(block(body))
    assert call.error is not None and message in call.error, call.error
