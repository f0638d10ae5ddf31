"""Faults: no model output can make the tool-call parser raise, hang, or run a call the model did not write.

Property-based (hypothesis) over arbitrary text, over soups of the fragments that matter (tags, brackets,
quotes, escapes, surrogates, NUL), and over real call objects: every call written as JSON comes back
exactly, through every harmless repair, and every prefix of one (a cut generation) either reads as what
the model wrote so far or is an error call, never a value it did not write. Then the explicit extremes:
nesting a million deep, megabyte inputs, a hundred thousand blocks, each bounded far below a hang.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swift_rlfactory.tools.calls import ToolCall, parse_json_calls, parse_tool_calls, parse_xml_tool_calls
from swift_rlfactory.tools.calls.call import MAX_DEPTH
from swift_rlfactory.tools.calls.scanner import has_tool_call

NAMES = frozenset({"f"})  # the tool offered: its call objects in prose are looked at

# Deadlines hold on a loaded 2-core machine; the database stays off so no .hypothesis/ lands in the repo.
PROPERTY = settings(
    max_examples=100,
    deadline=timedelta(seconds=5),
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
BOUND_S = 10.0  # "returns" versus "hangs": each extreme case takes well under a second here

FRAGMENTS = [
    "<tool_call>", "</tool_call>", "<think>", "</think>", "{", "}", "[", "]", '"', "'", ":", ",", "\\",
    "\\u", "\\ud83d", "\\ude00", "\ud83d", "\udfff", "\x00", "```", "```json\n", "//", "/*", "*/", "\n",
    '"name"', '"arguments"', '"parameters"', '"function"', '"f"', "1", "-", "true", "True", "None", " ",
    "é", "😀", "{'name': 'f', 'arguments': {", '{"name": "f", "arguments": {"q": ', '"x"}}',
]  # fmt: skip


def assert_sane(calls: Any) -> None:
    """What the executor and the model can rely on, whatever the text was."""
    assert isinstance(calls, list)
    for call in calls:
        assert isinstance(call, ToolCall)
        call.name.encode("utf-8")
        if call.error is None:
            assert call.name and isinstance(call.arguments, dict)
            json.dumps(call.arguments, ensure_ascii=False).encode("utf-8")  # any transport can carry it
        else:
            assert isinstance(call.error, str) and "\n" not in call.error and len(call.error) < 400
            call.error.encode("utf-8")


@PROPERTY
@given(st.text())
def test_any_text_parses_without_raising(text):
    assert_sane(parse_tool_calls(text))
    assert_sane(parse_tool_calls(text, NAMES))
    assert_sane(parse_json_calls(text, NAMES))
    assert isinstance(has_tool_call(text), bool)


@PROPERTY
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=3), max_size=40).map("".join))
def test_any_soup_of_tags_brackets_quotes_and_surrogates_parses_without_raising(text):
    assert_sane(parse_tool_calls(text))
    assert_sane(parse_tool_calls(f"<tool_call>{text}"))
    assert_sane(parse_tool_calls(f"<tool_call>{text}</tool_call>"))
    for prose in (f"Let me see. {text}", f"<|python_tag|>{text}"):  # a Llama call object after prose
        assert_sane(parse_tool_calls(prose, NAMES))
        assert_sane(parse_json_calls(prose, NAMES))
        assert_sane(parse_xml_tool_calls(prose, [{"name": "f"}]))


# Real calls. Strings include the tags and quotes that a naive parser cuts at.
TEXT = st.lists(
    st.sampled_from(
        ["</tool_call>", "<tool_call>", "<think>", "</think>", '"', "'", "\\", "{", "]", "\n", "//"]
    )
    | st.text(st.characters(blacklist_categories=("Cs",)), max_size=6),
    max_size=5,
).map("".join)
SCALAR = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT
VALUE = st.recursive(
    SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8
)
NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,20}", fullmatch=True)
CALLS = st.tuples(NAME, st.dictionaries(TEXT, VALUE, max_size=4))


@PROPERTY
@given(CALLS, st.booleans(), st.sampled_from([None, 2]), st.sampled_from(["", "<think>x</think>\n", "Ok.\n"]))
def test_every_call_written_as_json_comes_back_exactly(call, ascii_only, indent, before):
    name, arguments = call
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=ascii_only, indent=indent)
    for text in (f"{before}<tool_call>\n{body}\n</tool_call>", f"{before}<tool_call>\n{body}"):
        assert [(c.name, c.arguments, c.error) for c in parse_tool_calls(text)] == [(name, arguments, None)]


@PROPERTY
@given(CALLS, st.sampled_from([None, 2]), st.sampled_from(["", "<think>x</think>\n", "x</think>\n"]))
def test_every_call_written_as_bare_json_comes_back_exactly(call, indent, before):
    """Without ``<tool_call>`` tags too: a think or block tag in a string is argument text."""
    name, arguments = call
    body = json.dumps({"name": name, "arguments": arguments}, indent=indent)
    for parse in (parse_tool_calls, parse_json_calls):
        assert [(c.name, c.arguments, c.error) for c in parse(before + body)] == [(name, arguments, None)]


def sloppy(value: Any, draw: Any) -> str:
    """``value`` as a small model might write it, with only the repairs that keep its meaning."""
    comment = draw(st.sampled_from(["", "", " // note\n", " /* note */ "]))
    if isinstance(value, dict):
        items = [f"{sloppy(k, draw)}: {sloppy(v, draw)}" for k, v in value.items()]
        return "{" + comment + ", ".join(items) + draw(st.sampled_from(["", ","])) * bool(items) + "}"
    if isinstance(value, list):
        items = [sloppy(v, draw) for v in value]
        return "[" + ", ".join(items) + draw(st.sampled_from(["", ","])) * bool(items) + "]" + comment
    if isinstance(value, str) and draw(st.booleans()):  # single quotes
        return "'" + json.dumps(value)[1:-1].replace('\\"', '"').replace("'", "\\'") + "'"
    if value is None or isinstance(value, bool):
        return draw(st.sampled_from([json.dumps(value), repr(value)]))  # JSON's or Python's literal
    return json.dumps(value)


@PROPERTY
@given(CALLS, st.data())
def test_harmless_repairs_keep_every_value(call, data):
    name, arguments = call
    body = sloppy({"name": name, "arguments": arguments}, data.draw)
    cut = len(body) - len(body.rstrip("}]"))  # closing brackets missing at the very end
    shorter = body[: len(body) - data.draw(st.integers(0, cut))]
    whole = True
    if shorter.rstrip().endswith(('"', "'", "}", "]", "true", "false", "null", "True", "False", "None")):
        body, whole = shorter, shorter == body
    # one closing brace too many, on a whole call only: after a cut, '[null' + '}' is a bracket that does
    # not close its list, which the parser rightly refuses (hypothesis found that pair on 2026-12-02)
    extra = [f"{body}}}"] if whole else []
    body = data.draw(st.sampled_from([body, f"```json\n{body}\n```", *extra, f"\n  {body}\n"]))
    [got] = parse_tool_calls(f"<tool_call>{body}</tool_call>")
    assert (got.name, got.arguments, got.error) == (name, arguments, None), body


def scalars(value: Any) -> list[Any]:
    """Every key and leaf of a JSON value."""
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in [k, *scalars(v)]]
    if isinstance(value, list):
        return [x for v in value for x in scalars(v)]
    return [value]


@PROPERTY
@given(CALLS, st.data())
def test_a_cut_call_never_reads_as_a_value_the_model_did_not_write(call, data):
    name, arguments = call
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    written = {json.dumps(x) for x in scalars(arguments)}
    for end in sorted(set(data.draw(st.lists(st.integers(0, len(body) - 1), min_size=1, max_size=25)))):
        calls = parse_tool_calls(f"<tool_call>{body[:end]}")
        assert_sane(calls)
        for got in calls:
            if got.error is None:  # read as far as it went: no invented "", no cut strings or numbers
                assert got.name == name
                assert {json.dumps(x) for x in scalars(got.arguments)} <= written, body[:end]


def timed(text: str) -> tuple[list[ToolCall], float]:
    start = time.perf_counter()
    calls = parse_tool_calls(text)
    return calls, time.perf_counter() - start


def nested(depth: int, closed: bool) -> str:
    inner = '{"a": ' * depth + "1" + "}" * depth * closed
    return f'{{"name": "f", "arguments": {inner}' + "}" * closed


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1_000, 300_000])
@pytest.mark.parametrize("closed_json", [True, False])
@pytest.mark.parametrize("closed_block", [True, False])
def test_deep_nesting_is_an_error_call_not_a_recursion_error(depth, closed_json, closed_block):
    text = "<tool_call>" + nested(depth, closed_json) + "</tool_call>" * closed_block
    [call], took = timed(text)
    assert f"nested deeper than {MAX_DEPTH}" in call.error and took < BOUND_S
    for bare in ("[" * depth, "[" * depth + "]" * depth, nested(depth, closed_json)):
        assert timed(bare)[0] == []  # a bare reply that deep is no call (and no crash)
    arguments_string = json.dumps({"name": "f", "arguments": "[" * depth})
    [call], took = timed(f"<tool_call>{arguments_string}</tool_call>")
    assert call.error is not None and took < BOUND_S


def test_nesting_up_to_the_limit_still_parses():
    [call] = parse_tool_calls(f"<tool_call>{nested(MAX_DEPTH - 2, True)}</tool_call>")
    assert call.error is None


@pytest.mark.parametrize(
    "text, expect",
    [
        ('<tool_call>{"name": "f", "arguments": {"q": "' + "x" * 1_000_000 + '"}}</tool_call>', "call"),
        ("<tool_call>{'name': 'f', 'arguments': {'q': [" + "1, " * 100_000 + "]}}</tool_call>", "call"),
        ('<tool_call>{"name": "f", "arguments": {"q": "' + 'ab" ' * 250_000 + '"}}</tool_call>', "error"),
        ("<tool_call>" + "x" * 1_000_000, "error"),
        ("<tool_call>" + '"' * 1_000_000 + "</tool_call>", "error"),
        ("<tool_call>{'a': " + "'" * 300_000, "error"),
        ("x" * 1_000_000, "none"),
        ("{" * 1_000_000, "none"),
        ("<think>" * 100_000, "none"),
        ("</tool_call>" * 100_000, "none"),
        ("<tool_call>```" + " " * 1_000_000, "error"),  # a backtracking fence regex took minutes here
        ("```json\n" + "\n" * 1_000_000 + "x", "none"),
        ("<tool_call>{//" * 20_000, "error"),  # comments that ran to the end for every block: quadratic
        ("<tool_call>{/*" * 20_000, "error"),
    ],
    ids=lambda value: ascii(value[:24]),
)
def test_megabyte_inputs_return_in_bounded_time(text, expect):
    calls, took = timed(text)
    assert took < BOUND_S
    assert_sane(calls)
    outcomes = {"call" if c.error is None else "error" for c in calls}
    assert outcomes == ({expect} if expect != "none" else set()) and (expect != "call" or len(calls) == 1)


@pytest.mark.parametrize(
    "text",
    [
        'Look: {"name": "f", "parameters": {"q": "' + "x" * 1_000_000,  # cut: a string never closed
        'Look: {"name": "f", ' * 100_000,  # a known name again and again, never a complete object
        'Look: {"name": "g", "parameters": {"q": "' * 100_000,  # an unknown name: never read
        'Look: {"name": "f", "parameters": {}} ' * 50_000,  # many calls
        "Look: {'name': 'f', 'parameters': {'q': [" + "1, " * 100_000 + "]}}",  # near-JSON, repaired
        'Look: {"name": "f", "parameters": {"q": "<think>"}} ' * 50_000,  # each holds a think tag
        '{"name": "f", "parameters": {"q": "' + "<think>" * 100_000,  # a string never closed, many tags
        "<function=f><parameter=q></think>" * 50_000,  # XML values never closed
        'Look: {"name": "f", "parameters": {"q": "<tool_call>"}} ' * 50_000,  # each holds a block tag
        '{"name": "f", "parameters": {"q": "' + "<tool_call>" * 100_000,  # never closed, many block tags
        "<function=f><parameter=q><tool_call>" * 50_000,  # XML values never closed, then a block tag
        "a<parameter=q><think>x</think>" * 50_000,  # an XML value never closed before each think block
        "<tool_call></tool_call><parameter=q><tool_call>" * 50_000,
    ],
    ids=lambda value: ascii(value[:24]),
)
def test_call_objects_in_megabytes_of_prose_return_in_bounded_time(text):
    for parse in (parse_json_calls, parse_tool_calls):
        t0 = time.monotonic()
        calls = parse(text, NAMES)
        assert time.monotonic() - t0 < BOUND_S
        assert_sane(calls)


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call><function=f><parameter=q>cut" * 50_000,  # values never closed: 18 s here, quadratic
        "<tool_call><function=f><parameter=q>x" * 50_000 + "</parameter>",  # one close, at the very end
        "<tool_call><function=f><parameter=q><tool_call>" * 50_000,
        "<tool_call><function=f>" + "".join(f"<parameter=q{i}>x</parameter>" for i in range(50_000)),
        "<function=f><parameter=q><tool_call>" * 50_000,  # untagged
    ],
    ids=lambda value: ascii(value[:24]),
)
def test_xml_calls_in_megabytes_return_in_bounded_time(text):
    """Each value is looked for up to the next call's ``<tool_call><function=`` only, which is looked
    for once per block: before, a value never closed searched the rest of the text for ``</parameter>``."""
    t0 = time.monotonic()
    calls = parse_xml_tool_calls(text, [{"name": "f"}])
    assert time.monotonic() - t0 < BOUND_S
    assert_sane(calls)


def test_many_blocks_stay_linear():
    calls, took = timed("<tool_call>" * 100_000)  # a quadratic scan for the closing tag took 34 s here
    assert len(calls) == 100_000 and took < 2 * BOUND_S  # linear: 1 s, or 7 s on a machine loaded 5x over
    calls, took = timed('<tool_call>{"name": "f", "arguments": {}}</tool_call>' * 5_000)
    assert [c.name for c in calls] == ["f"] * 5_000 and took < BOUND_S


@pytest.mark.parametrize(
    "arguments",
    [
        '{"q": "\\ud83d"}',
        '{"q": "\\ude00 x"}',
        '{"\\ud83d": 1}',
        '{"q": "\ud83d"}',
        '{"q": ["ok", "\udfff"]}',
    ],
)
def test_lone_surrogates_in_a_call_become_an_error_call(arguments):
    for text in (
        f'<tool_call>{{"name": "f", "arguments": {arguments}}}</tool_call>',
        f"<tool_call>{{'name': 'f', 'arguments': {arguments},}}</tool_call>",  # through the repair path
    ):
        [call] = parse_tool_calls(text)
        assert "lone surrogate" in call.error
        call.error.encode("utf-8")


def test_surrogates_elsewhere_are_harmless():
    [call] = parse_tool_calls('<tool_call>{"name": "f", "arguments": {"e": "\\ud83d\\ude00"}}</tool_call>')
    assert call.arguments == {"e": "😀"}  # a whole pair is one character
    assert [c.name for c in parse_tool_calls('\ud83d prose <tool_call>{"name": "f"}</tool_call>')] == ["f"]
    [call] = parse_tool_calls('<tool_call>{"name": "f\ud83d", "arguments": {}}</tool_call>')
    assert "lone surrogate" in call.error and call.name == "f\\ud83d"  # the name is escaped, not lost


def test_nul_bytes():
    [raw, escaped] = parse_tool_calls(
        '<tool_call>{"name": "f", "arguments": {"q": "a\x00b"}}</tool_call>'
        '<tool_call>{"name": "f", "arguments": {"q": "a\\u0000b"}}</tool_call>'
    )
    assert raw.arguments == escaped.arguments == {"q": "a\x00b"}  # string content, kept
    [outside] = parse_tool_calls('<tool_call>\x00{"name": "f", "arguments": {}}</tool_call>')
    assert "not a JSON object" in outside.error and "\x00" not in outside.error


def test_errors_never_echo_a_megabyte_back():
    for text in (
        "<tool_call>" + "word " * 200_000,
        '<tool_call>{"name": "f", "arguments": "' + "y" * 1_000_000 + '"}',
        '<tool_call>{"name": "' + "n" * 1_000_000 + '", "arguments": {}}',
        '<tool_call>{"name": "f", "arguments": [' + "1," * 300_000 + "]}",
    ):
        [call] = parse_tool_calls(text)
        assert call.error is not None and len(call.error) < 300 and len(call.name) <= 256
