"""Faults: a chat template's special tokens in model text (issue 32). An unclosed call followed by an
end-of-turn token runs, as if the call closed at the token (it was a parse error); and every special
token of the supported templates, before, inside, between and after calls, raises nothing, loses no call
and never reaches a call's arguments or the visible reply."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swift_rlfactory.tools.calls import call_parser, read_reply
from swift_rlfactory.tools.calls.scanner import visible_text

PROPERTY = settings(
    max_examples=150,
    deadline=timedelta(seconds=5),
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

TOKENS = [
    "<|im_end|>", "<|im_start|>", "<|endoftext|>",  # Qwen (hermes, qwen3_coder, qwen3_5)
    "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
    "<|eom_id|>", "<|finetune_right_pad_id|>",  # Llama 3
    "<|header_start|>", "<|header_end|>", "<|eot|>", "<|eom|>",  # Llama 4
    "<|User|>", "<|Assistant|>",  # Youtu
    "<s>", "</s>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>",  # Llama 2 / Mistral, Gemma
    "<｜end▁of▁sentence｜>", "<｜begin▁of▁sentence｜>", "<|user|>", "<|assistant|>", "<|observation|>",
]  # fmt: skip
END_TOKENS = ["<|im_end|>", "</s>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|eot|>", "<|end_of_text|>"]
TOOLS = [
    {
        "name": name,
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "string"}}},
    }
    for name in ("search", "run")
]
FORMATS = ("hermes", "llama3_json", "qwen3_coder")


def render(call_format: str, name: str, arguments: dict[str, str], closed: bool = True) -> str:
    """One call as a model of ``call_format`` writes it; ``closed=False`` cuts its closing tags."""
    if call_format == "qwen3_coder":
        params = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in arguments.items())
        return f"<tool_call>\n<function={name}>\n{params}" + ("</function>\n</tool_call>" if closed else "")
    key = "parameters" if call_format == "llama3_json" else "arguments"
    body = json.dumps({"name": name, key: arguments})
    if call_format == "llama3_json":
        return body if closed else body[:-1]  # a Llama call "unclosed": its last bracket missing
    return f"<tool_call>\n{body}\n</tool_call>" if closed else f"<tool_call>\n{body}"


def runs(calls) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in calls if c.error is None]


def assert_clean(text: str, calls) -> None:
    """No special token in a call's name or arguments, nor in the visible reply."""
    for call in calls:
        shown = call.name + json.dumps(call.arguments, ensure_ascii=False)
        assert not any(token in shown for token in TOKENS), call
    for visible in (visible_text(text), read_reply(text).visible):
        assert not any(token in visible for token in TOKENS), visible


@pytest.mark.parametrize("call_format", FORMATS)
@pytest.mark.parametrize("token", END_TOKENS)
def test_an_unclosed_call_before_an_end_token_runs(call_format, token):
    text = render(call_format, "search", {"q": "capital of France"}, closed=False) + token
    calls = call_parser(call_format, TOOLS)(text)
    assert runs(calls) == [("search", {"q": "capital of France"})] and len(calls) == 1
    assert read_reply(text).writes_call or call_format == "llama3_json"  # a cut Llama object is prose to it
    assert_clean(text, calls)


@pytest.mark.parametrize("call_format", FORMATS)
def test_calls_separated_by_end_tokens_all_run(call_format):
    first = render(call_format, "search", {"q": "a"})
    second = render(call_format, "run", {"n": "2"}, closed=False)
    text = f"{first}<|im_end|>\n{second}<|eot_id|>"
    calls = call_parser(call_format, TOOLS)(text)
    assert runs(calls) == [("search", {"q": "a"}), ("run", {"n": "2"})]


def test_an_end_token_in_a_json_string_ends_the_block_it_never_reaches_the_tool():
    text = '<tool_call>{"name": "run", "arguments": {"q": "say <|im_end|> now"}}</tool_call>'
    calls = call_parser("hermes", TOOLS)(text)
    assert len(calls) == 1 and calls[0].error is not None  # cut at the token: the string never closed
    assert_clean(text, calls)


VALUES = st.text(alphabet="abcxyz 019.,:;!?-_'\"{}[]", max_size=12)
CALLS = st.lists(
    st.tuples(st.sampled_from(["search", "run"]), st.dictionaries(st.sampled_from(["q", "n"]), VALUES)),
    min_size=1,
    max_size=3,
)


@PROPERTY
@given(
    call_format=st.sampled_from(FORMATS),
    calls=CALLS,
    token=st.sampled_from(TOKENS),
    where=st.sampled_from(["before", "between", "after"]),
    last_closed=st.booleans(),
    at=st.integers(min_value=0),
)
def test_a_special_token_outside_a_call_changes_nothing(call_format, calls, token, where, last_closed, at):
    """Before the calls, between two of them, or after the last (closed or not): every call runs."""
    if call_format == "llama3_json" and len(calls) > 1:
        last_closed = True  # a Llama call cut before another one is prose between them
    pieces = [
        render(call_format, n, a, closed=i < len(calls) - 1 or last_closed) for i, (n, a) in enumerate(calls)
    ]
    slot = {"before": 0, "after": len(pieces), "between": 1 + at % max(1, len(pieces) - 1)}[where]
    pieces.insert(min(slot, len(pieces)), token)
    text = "\n".join(pieces)
    parsed = call_parser(call_format, TOOLS)(text)
    assert runs(parsed) == calls and len(parsed) == len(calls)
    assert_clean(text, parsed)


@PROPERTY
@given(call_format=st.sampled_from(FORMATS), calls=CALLS, token=st.sampled_from(TOKENS), at=st.integers(0))
def test_a_special_token_inside_a_call_loses_no_other_call(call_format, calls, token, at):
    """Inside one call's JSON or XML: that call may break (an error call), the others all run."""
    pieces = [render(call_format, n, a) for n, a in calls]
    hit = at % len(pieces)
    inside = 1 + at // len(pieces) % (len(pieces[hit]) - 1)
    pieces[hit] = pieces[hit][:inside] + token + pieces[hit][inside:]
    text = "\n".join(pieces)
    parsed = call_parser(call_format, TOOLS)(text)
    ran = runs(parsed)
    others = [call for i, call in enumerate(calls) if i != hit]
    assert all(call in ran for call in others), (ran, others)
    assert_clean(text, parsed)


def test_every_special_token_of_the_supported_templates_is_fuzzed():
    """The tokens above cover what ms-swift's templates of the supported agent templates render."""
    from swift.template import TEMPLATE_MAPPING

    supported = ("llama3", "llama4", "qwen3_coder", "qwen3_5", "youtu")
    found = set()
    for name, meta in TEMPLATE_MAPPING.items():
        agent = meta.agent_template or "hermes"
        if agent in supported or agent == "hermes" and name.startswith("qwen"):
            for part in ("prefix", "prompt", "chat_sep", "suffix", "system_prefix"):
                for item in getattr(meta, part, None) or []:
                    found |= set(re.findall(r"<\|[^<>\s]+\|>", item)) if isinstance(item, str) else set()
    assert found and found <= set(TOKENS), found - set(TOKENS)
