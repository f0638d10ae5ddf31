"""Rewards read the reply the tool-call parser reads: reasoning is not an answer, nor a call.

A thinking model weighs candidates in ``<think>``; ``em``, ``f1``, ``format`` and ``turn_format`` must not
pay for an answer written only there (nor when ``<think>`` is never closed), and must not punish a reply
whose reasoning merely mentions ``<tool_call>``, a call the parser ignored. The property tests build
replies from pieces (think tags, tool calls whose JSON strings hold tags, answers, text in any script) and
check that an answer counts exactly where a call in its place would run.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from swift_rlfactory.rewards import process, rules
from swift_rlfactory.rewards.rules import extract_answer, normalize_answer, visible_reply
from swift_rlfactory.rollout.episode import Generation, run_episode
from swift_rlfactory.tools import Limits, ToolExecutor, tool
from swift_rlfactory.tools.calls import parse_tool_calls
from swift_rlfactory.tools.toolset import PythonProvider
from swift_rlfactory.trajectory import Trajectory

CALL = '<tool_call>\n{"name": "search", "arguments": {"query": "capital of France"}}\n</tool_call>'


def reply(text: str, golds: tuple[str, ...] = ("Paris",)) -> Trajectory:
    """A one-turn trajectory whose only assistant turn is ``text``."""
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": text}]
    return Trajectory(messages=messages, turns=1, row={"golden_answers": list(golds)})


def scores(trajectory: Trajectory) -> tuple[float, float, float, list[float]]:
    return (
        rules.em(trajectory),
        rules.f1(trajectory),
        rules.format_reward(trajectory),
        process.turn_format(trajectory),
    )


@pytest.mark.parametrize(
    "text",
    [
        "<think>Maybe <answer>Paris</answer>?</think>\nI don't know.",  # considered, then not given
        "<think>Maybe <answer>Paris</answer>?",  # reasoning never closed: nothing is visible
        "I think <think>it is <answer>Paris</answer>",  # visible text before an unclosed <think>
        "Perhaps <answer>Paris</answer>, no.</think>\nI don't know.",  # the prompt opened the reasoning
        "<think>a</think> b <think><answer>Paris</answer></think> c",  # a second think block counts too
        f"{CALL[:-12]}<answer>Paris</answer></tool_call>",  # an answer inside a call's block is no answer
    ],
)
def test_an_answer_only_in_reasoning_earns_nothing(text):
    assert extract_answer(text) is None
    assert scores(reply(text)) == (0.0, 0.0, 0.0, [0.0])


def test_without_the_tag_the_visible_reply_is_graded_not_the_reasoning():
    assert rules.em(reply("<think>Paris? or Lyon</think>Lyon"), require_tag=False) == 0.0
    assert rules.em(reply("<think>Lyon? or Paris</think>Paris"), require_tag=False) == 1.0
    assert rules.f1(reply("<think>Paris, I guess"), require_tag=False) == 0.0


@pytest.mark.parametrize(
    "text",
    [
        "<answer>Paris</answer>",  # a model without reasoning
        "<think>\n\n</think>\n\n<answer>Paris</answer>",  # Qwen3 with thinking off
        f"<think>Should I search?\n{CALL}\nNo, I know it.</think>\n<answer>Paris</answer>",
        "<think>Is it <answer>Lyon</answer>? Or <tool_call> again?</think><answer>Paris</answer>",
        "<think>a</think> b <think><answer>Lyon</answer></think><answer>Paris</answer>",
        "Lyon? <answer>Lyon</answer> no: Paris.</think>\n\n<answer>Paris</answer>",  # prompt-opened think
    ],
)
def test_a_perfect_reply_scores_whatever_its_reasoning_mentions(text):
    assert extract_answer(text) == "Paris"
    assert scores(reply(text)) == (1.0, 1.0, 1.0, [1.0])


def test_a_tool_turn_whose_reasoning_mentions_an_answer_follows_the_protocol():
    turn = f"<think>If it is <answer>Paris</answer> I am done; check.</think>\n{CALL}"
    calls = [{"tool": "search", "error": None, "turn": 1}]
    trajectory = Trajectory(
        messages=[
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": turn},
            {"role": "tool", "content": "Paris is the capital of France."},
            {"role": "assistant", "content": "<think>\n\n</think>\n\n<answer>Paris</answer>"},
        ],
        tool_calls=calls,
        turns=2,
    )
    assert process.turn_format(trajectory) == [1.0, 1.0]
    trajectory.messages[1]["content"] = f"<answer>Paris</answer>\n{CALL}"
    assert process.turn_format(trajectory) == [0.0, 1.0]


def test_a_literal_think_tag_after_the_reasoning_is_read_as_the_parser_reads_it():
    """The parser takes every ``<think>`` as reasoning, even one written inside an answer, and does not run
    a call after it; the answer is not graded either (one rule for what the reply is)."""
    after = "<think>ok</think><answer>the <think> tag, then "
    assert parse_tool_calls(after + CALL) == []
    assert extract_answer(after + "Paris</answer>") is None
    closed = "<think>ok</think><answer>Paris <think>aside</think></answer>"
    assert extract_answer(closed) == "Paris" and rules.format_reward(reply(closed)) == 1.0


@pytest.mark.parametrize(
    ("answer", "gold"),
    [("北京。", "北京"), ("東京都", "東京都"), ("Straße", "STRASSE"), ("ＢＢＣ", "BBC"), ("-227", "-227")],
)
def test_answers_in_any_script_after_reasoning_in_any_script(answer, gold):
    text = f"<think>答案可能是<answer>上海</answer>，不对。</think>\n<answer>{answer}</answer>"
    assert scores(reply(text, golds=(gold,))) == (1.0, 1.0, 1.0, [1.0])


# -- properties ---------------------------------------------------------------------------------------

_WORDS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="<{"), min_size=1, max_size=12
)
_ANSWERS = _WORDS.filter(lambda a: normalize_answer(a) != "")
# Tags inside a call's JSON strings are argument text. ("</think>" is left out: in reasoning the parser
# takes the first one as the end of it wherever it stands, which would make the cases below a different one.)
_TAGGED_JSON = st.sampled_from(["<think>", "<answer>", "</answer>", "<tool_call>", "</tool_call>"])


@st.composite
def _call(draw, name: str = "search") -> str:
    """A well-formed call whose argument may hold any tag as text (inside a JSON string it is no tag)."""
    query = draw(st.lists(st.one_of(_TAGGED_JSON, _WORDS), max_size=3).map("".join))
    body = json.dumps({"name": name, "arguments": {"query": query}}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def _pieces(closing: bool = True) -> st.SearchStrategy[list[str]]:
    """Pieces of a reply: text, think tags, stray tags, well-formed calls, and slots ("@") for answers."""
    tags = ["<think>", "</answer>", "</tool_call>", "@"] + (["</think>"] if closing else [])
    return st.lists(st.one_of(_WORDS, st.sampled_from(tags), _call()), max_size=12)


@settings(max_examples=300, deadline=None)
@given(pieces=_pieces(), answers=st.lists(_ANSWERS, min_size=1, max_size=4, unique=True))
def test_an_answer_counts_exactly_where_a_call_in_its_place_would_run(pieces, answers):
    """Fill the slots with distinct answers, or with calls named after them: the answers the rewards see
    are the calls the parser runs."""
    slots = [i for i, piece in enumerate(pieces) if piece == "@"]
    names = [f"a{i}" for i in range(len(slots))]
    as_answers, as_calls = list(pieces), list(pieces)
    for slot, name in zip(slots, names, strict=True):
        as_answers[slot] = f"<answer>{name}</answer>"
        as_calls[slot] = f'<tool_call>{{"name": "{name}", "arguments": {{}}}}</tool_call>'
    seen = rules.answer_blocks(visible_reply("".join(as_answers)))
    run = [call.name for call in parse_tool_calls("".join(as_calls)) if call.name in names]
    assert seen == run
    last = extract_answer("".join(as_answers))
    assert last == (run[-1] if run else None)


@settings(max_examples=200, deadline=None)
@given(reasoning=_pieces(closing=False), answer=_ANSWERS, considered=_ANSWERS, empty=st.booleans())
def test_reasoning_never_changes_the_score_of_the_answer_after_it(reasoning, answer, considered, empty):
    """Whatever the reasoning holds (answers, calls, ``<think>``, stray tags, any script), the reply after
    ``</think>`` is what scores; the same reasoning left open scores nothing."""
    thought = "".join(f"<answer>{considered}</answer>" if p == "@" else p for p in reasoning)
    thought = "" if empty else thought
    golds = (answer,)
    assert scores(reply(f"<think>{thought}</think>\n<answer>{answer}</answer>", golds)) == (1, 1, 1, [1])
    assert scores(reply(f"<think>{thought}</think>\nI don't know.", golds)) == (0, 0, 0, [0])
    assert scores(reply(f"<think>{thought}\n<answer>{answer}</answer>", golds)) == (0, 0, 0, [0])
    if "<think>" not in reasoning:  # else the first </think> closes that block, not one the prompt opened
        assert scores(reply(f"{thought}</think>\n<answer>{answer}</answer>", golds)) == (1, 1, 1, [1])


# -- calls past max_calls_per_turn parsed ----------------------------------------------------------


@tool
def lookup(key: str) -> str:
    """Return the key, upper case."""
    return key.upper()


def _episode(first_turn: str) -> Trajectory:
    """A real rollout: ``first_turn``, its calls run by a real executor (two calls a turn), then an answer."""
    turns = iter([first_turn, "<answer>Paris</answer>"])

    async def generate(messages):
        return Generation(next(turns))

    with ToolExecutor([PythonProvider([lookup])], Limits()) as executor:
        prompt = [{"role": "user", "content": "q"}]
        return asyncio.run(
            run_episode(prompt, generate, executor, 3, max_calls_per_turn=2, row={"answer": "Paris"})
        )


@pytest.mark.timeout(60)
def test_calls_past_the_limit_are_not_malformed_but_a_broken_call_is():
    call = '<tool_call>{"name": "lookup", "arguments": {"key": "k"}}</tool_call>'
    over = _episode(call * 3)
    assert [c["error"] is None for c in over.tool_calls] == [True, True, False]
    assert rules.format_reward(over) == 1.0 and process.turn_format(over) == [1.0, 1.0]
    assert rules.tool_use(over) < 1.0  # the call that did not run is still no success

    broken = _episode(call + '<tool_call>{"name": "lookup", "arguments": {"key": }}</tool_call>')
    assert broken.tool_calls[1]["error"].startswith("could not parse")
    assert rules.format_reward(broken) == 0.0 and process.turn_format(broken) == [0.0, 1.0]


@pytest.mark.parametrize(
    ("record", "malformed"),
    [
        ({"error": "could not parse tool call: too many tool calls in one turn (limit 8)"}, False),
        ({"error": "not run: too many tool calls in one turn (limit 8)", "error_kind": "limit"}, False),
        (
            {"error": "could not parse tool call: too many tool calls in one turn", "error_kind": "limit"},
            False,
        ),
        ({"error": "could not parse tool call: empty <tool_call> block"}, True),
        ({"error": "could not parse tool call: empty <tool_call> block", "error_kind": "parse"}, True),
        ({"error": "tool 'search' timed out after 30 s", "error_kind": None}, False),
        ({"error": None}, False),
    ],
)
def test_only_calls_the_parser_could_not_read_cost_the_format_reward(record, malformed):
    """Records as the executor writes them, with the ``error_kind`` it adds and from logs written before."""
    trajectory = reply("<answer>Paris</answer>")
    trajectory.tool_calls = [{**record, "turn": 1}]
    trajectory.messages[1:1] = [{"role": "assistant", "content": CALL}, {"role": "tool", "content": "ok"}]
    trajectory.turns = 2
    assert rules.parse_failed(record) is malformed
    assert rules.format_reward(trajectory) == float(not malformed)
    assert process.turn_format(trajectory) == [float(not malformed), 1.0]


# -- a reply that writes a call in any format we read is no answer (the reward does not know the format) --
XML_CALL = "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n</function>\n</tool_call>"


@pytest.mark.parametrize(
    "text",
    [
        f"{CALL}\n<answer>Paris</answer>",  # hermes
        f"{XML_CALL}\n<answer>Paris</answer>",  # Qwen3-Coder's XML
        "<function=search>\n<parameter=query>\nx\n</parameter>\n</function>\n<answer>Paris</answer>",  # untagged
        '<|python_tag|>{"name": "search", "parameters": {"query": "x"}} <answer>Paris</answer>',  # Llama's
        '{"name": "search", "arguments": {"query": "<answer>Paris</answer>"}}',  # the answer is an argument
        '{"name": "search", "parameters": {"query": "Paris"}}<|eom_id|>',  # no answer at all
    ],
)
def test_a_turn_that_writes_a_call_in_any_format_is_not_a_well_formed_answer(text):
    assert not rules.answers_once(text)
    assert rules.format_reward(reply(text)) == 0.0 and process.turn_format(reply(text)) == [0.0]


@pytest.mark.parametrize(
    "text",
    [
        "<answer>Paris</answer>",
        f"<think>{XML_CALL}</think><answer>Paris</answer>",  # a call considered, not written
        'Its record is {"name": "Paris", "kind": "city"}. <answer>Paris</answer>',  # JSON, not a call
    ],
)
def test_an_answer_with_only_mentions_of_calls_is_well_formed(text):
    assert rules.answers_once(text)


def _xml(name: str) -> str:
    return f"<tool_call>\n<function={name}>\n</function>\n</tool_call>"


@settings(max_examples=200, deadline=None)
@given(pieces=_pieces(), xml=st.booleans(), bare=st.booleans())
def test_answers_once_sees_every_call_some_parser_reads_and_the_reply_they_read(pieces, xml, bare):
    """One scan gives the visible reply the parsers read and sees each call any of them finds."""
    from swift_rlfactory.tools.calls import parse_json_calls, parse_xml_tool_calls, read_reply
    from swift_rlfactory.tools.calls.scanner import visible_text

    text = "".join(_xml("a") if xml and p == "@" else "<answer>a</answer>" if p == "@" else p for p in pieces)
    if bare:
        text = text.replace("<tool_call>", "").replace("</tool_call>", "")
    # A tag inside a JSON string ends an XML block there (as vLLM's reader does) but not a JSON one, so the
    # two readers disagree on where reasoning starts; the property is about texts they read alike.
    assume(not re.search(r'"[^"]*</?(?:tool_call|think)>', text))
    found = read_reply(text)
    assert found.visible == visible_text(text)
    if parse_tool_calls(text) or parse_xml_tool_calls(text) or parse_json_calls(text):
        assert found.writes_call and not rules.answers_once(text)


# -- an answer inside a call's argument is argument text, in every format we read ---------------------
CODE_TOOLS = [
    {
        "type": "function",
        "function": {"name": "run", "parameters": {"properties": {"code": {"type": "string"}}}},
    }
]
PRINTS = 'print("<answer>Paris</answer>")'
XML_PRINTS = f"<function=run>\n<parameter=code>\n{PRINTS}\n</parameter>\n</function>"


@pytest.mark.parametrize(
    ("call_format", "text"),
    [
        ("hermes", json.dumps({"name": "run", "arguments": {"code": PRINTS}})),  # a bare call
        ("hermes", "```json\n" + json.dumps([{"name": "run", "arguments": {"code": PRINTS}}]) + "\n```"),
        ("llama3_json", "Ok. " + json.dumps({"name": "run", "parameters": {"code": PRINTS}})),  # after prose
        ("llama3_json", "<|python_tag|>" + json.dumps({"name": "run", "parameters": {"code": PRINTS}})),
        ("llama3_json", "Ok. {'name': 'run', 'parameters': {'code': 'print(\"<answer>Paris</answer>\")'}}"),
        ("llama3_json", 'Ok. {"type": "function", "function": {"name": "run", "parameters": {"code": "'
         '<answer>Paris</answer>"}}}'),
        ("qwen3_coder", XML_PRINTS),  # XML without its tags
        ("qwen3_coder", f"<tool_call>\n{XML_PRINTS.replace('<answer>', '</tool_call><answer>')}\n</tool_call>"),
    ],
)  # fmt: skip
def test_an_answer_in_the_argument_of_a_call_the_parser_reads_earns_nothing(call_format, text):
    """The reply's own parser reads the text as a call, so the answer in it is what the call's code prints,
    not the reply's answer: it earns nothing, as one in a ``<tool_call>`` block. Before, the text of a
    call written without tags (or an XML block whose value holds ``</tool_call>``) was read for answers,
    so a policy could be paid for an answer it only passed to a tool, in a turn that did not end the
    episode."""
    from swift_rlfactory.tools.calls import call_parser

    [call] = call_parser(call_format, CODE_TOOLS)(text)
    assert call.error is None and "<answer>Paris</answer>" in call.arguments["code"]
    assert extract_answer(text) is None
    assert scores(reply(text)) == (0.0, 0.0, 0.0, [0.0])


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ('<answer>{"name": "run", "arguments": {"code": "x"}}</answer>', '{"name": "run", "arguments": {"code": "x"}}'),
        ('Its record: {"name": "Paris", "arguments": {}}. <answer>Paris</answer>', "Paris"),
        ('I ran {"name": "run", "arguments": {"code": "print(\'<answer>\')"}}: <answer>Paris</answer>', "Paris"),
        ('<answer>{"name": "f", "arguments": {"s": "</answer>"}}</answer>', '{"name": "f", "arguments": {"s": "</answer>"}}'),
    ],
)  # fmt: skip
def test_an_answer_that_holds_or_follows_call_json_is_still_the_answer(text, answer):
    """Only tags inside a call's argument are its text: a JSON answer, and an answer after JSON that
    mentions a tag, are answers as before (a closing tag in the JSON no longer cuts the answer short)."""
    assert extract_answer(text) == answer


@pytest.mark.timeout(60)
def test_a_last_turn_that_only_calls_with_the_answer_in_its_argument_scores_nothing():
    """A real rollout, read by the format's parser (Llama's call after prose): the last turn is a call, so
    the episode ends at ``max_turns`` without an answer, and the ``em`` reward scores it 0."""
    from swift_rlfactory.rewards.registry import RewardSpec
    from swift_rlfactory.rewards.terms import RewardTerm
    from swift_rlfactory.tools.calls import call_parser

    @tool
    def run(code: str) -> str:
        """Pretend to run ``code``."""
        return "ran"

    call = "Let me check. " + json.dumps({"name": "run", "parameters": {"code": PRINTS}})

    def episode(last: str) -> Trajectory:
        turns = iter([call, last])

        async def generate(messages):
            return Generation(next(turns))

        with ToolExecutor([PythonProvider([run])], Limits()) as executor:
            return asyncio.run(
                run_episode(
                    [{"role": "user", "content": "q"}],
                    generate,
                    executor,
                    2,
                    row={"answer": "Paris"},
                    parse=call_parser("llama3_json", executor.schemas()),
                )
            )

    spec = RewardSpec([RewardTerm(name="em")])
    called = episode(call)
    assert called.stop_reason == "max_turns" and [c["error"] for c in called.tool_calls] == [None]
    answered = episode("<answer>Paris</answer>")
    assert answered.stop_reason == "answer"
    assert spec.score([called, answered]) == [0.0, 1.0]


def test_a_tool_turn_whose_call_argument_holds_an_answer_tag_follows_the_protocol():
    """A tool turn must not answer, and an ``<answer>`` inside its call's argument is no answer: the turn
    follows the protocol (it was 0 before), while one that also answers outside the call does not."""
    call = "Let me check. " + json.dumps({"name": "run", "parameters": {"code": "print('<answer>')"}})
    trajectory = Trajectory(
        messages=[
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": call},
            {"role": "tool", "content": "<answer>"},
            {"role": "assistant", "content": "<answer>Paris</answer>"},
        ],
        tool_calls=[{"tool": "run", "error": None, "turn": 1}],
        turns=2,
    )
    assert process.turn_format(trajectory) == [1.0, 1.0]
    trajectory.messages[1]["content"] = f"<answer>Paris {call}"
    assert process.turn_format(trajectory) == [0.0, 1.0]


@settings(max_examples=200, deadline=None)
@given(
    pieces=_pieces(),
    answer=_ANSWERS,
    where=st.integers(0, 12),
    key=st.sampled_from(["arguments", "parameters"]),
)
def test_an_answer_in_an_untagged_calls_argument_changes_no_score(pieces, answer, where, key):
    """Wherever a call written without tags stands among text, think tags, calls and answers, an answer in
    its argument reads as any other argument text: what the rewards see is what they see without it."""
    filled = [f"<answer>a{i}</answer>" if piece == "@" else piece for i, piece in enumerate(pieces)]

    def written(code: str) -> str:
        call = json.dumps({"name": "run", key: {"code": code}})
        return "".join(filled[:where] + [call] + filled[where:])

    holding, plain = written(f"print('<answer>{answer}</answer>')"), written("print(4)")
    assert extract_answer(holding) == extract_answer(plain)
    assert rules.answers_once(holding) == rules.answers_once(plain)
    assert rules.opens_answer(visible_reply(holding)) == rules.opens_answer(visible_reply(plain))
