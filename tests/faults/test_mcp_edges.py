"""MCP servers that bend the protocol: stdout banners, odd results and odd tool listings.

Each test starts ``tests/servers/odd_server.py``, a raw JSON-RPC stdio server (the SDK's servers cannot
misbehave this way on purpose) with the flags that select its fault, and drives it through
:class:`ToolExecutor`, the way training does.
"""

from __future__ import annotations

import json
import logging
import time

import pytest

from swift_rlfactory.tools import Limits, ToolCall, ToolExecutor
from swift_rlfactory.tools.mcp import McpProvider
from swift_rlfactory.tools.mcp.config import McpServerConfig
from tests.test_mcp import ROOT

ODD_SERVER = ROOT / "tests" / "servers" / "odd_server.py"
RAW_SERVER = ROOT / "tests" / "servers" / "raw_server.py"


def odd(*flags: str) -> McpProvider:
    config = McpServerConfig(command="python", args=[str(ODD_SERVER), ",".join(flags)], startup_timeout_s=20)
    return McpProvider("odd", config)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("flag", "shown"), [("nonl", "Loading 100%"), ("banner", "Weather server v1.2")])
def test_stdout_banner_is_dropped_with_a_warning(
    flag: str, shown: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Text printed before the protocol - a progress bar without a newline glued onto the initialize reply,
    or a banner line - is dropped with a warning showing it; the server starts at once and works."""
    start = time.perf_counter()
    with (
        caplog.at_level(logging.WARNING, logger="swift_rlfactory.tools.mcp"),
        ToolExecutor([odd(flag)], Limits(call_timeout_s=10)) as executor,
    ):
        assert time.perf_counter() - start < 15  # not the 20 s handshake timeout
        assert executor.execute([ToolCall("echo", {"x": 1})])[0].observation == '{"x": 1}'
    assert any(shown in record.getMessage() for record in caplog.records), caplog.text


@pytest.mark.timeout(60)
def test_odd_results_are_shown() -> None:
    """``isError`` with only structured content shows that content; a content block of an unknown type is
    replaced by a short note and the rest of the result still renders."""
    with ToolExecutor([odd()], Limits(call_timeout_s=10, retries=0)) as executor:
        struct_error, weird, echo = executor.execute(
            [ToolCall("struct_error", {}), ToolCall("weird", {}), ToolCall("echo", {"x": 2})]
        )
    assert not struct_error.ok and '{"error": "quota exceeded"}' in struct_error.error, struct_error.error
    assert weird.ok, weird.error
    assert weird.observation == "before\n[content of unknown type 'hologram' left out]\nafter"
    assert echo.observation == '{"x": 2}'


@pytest.mark.timeout(60)
def test_a_tool_listed_twice_counts_once() -> None:
    with ToolExecutor([odd("dup")], Limits(call_timeout_s=10)) as executor:
        assert sorted(executor.tools) == ["echo", "struct_error", "weird"]


@pytest.mark.timeout(60)
def test_a_tool_without_input_schema_takes_no_arguments(caplog: pytest.LogCaptureFixture) -> None:
    """One tool without ``inputSchema`` does not fail the server's start: it gets an empty schema and a
    warning names it."""
    with (
        caplog.at_level(logging.WARNING, logger="swift_rlfactory.tools.mcp"),
        ToolExecutor([odd("noschema")], Limits(call_timeout_s=10)) as executor,
    ):
        assert sorted(executor.tools) == ["bare", "echo", "struct_error", "weird"]
        assert executor.tools["bare"].spec.parameters == {"type": "object", "properties": {}}
        assert executor.execute([ToolCall("bare", {})])[0].observation == "{}"
    assert any("'bare' without inputSchema" in record.getMessage() for record in caplog.records)


@pytest.mark.timeout(60)
def test_a_tools_list_that_never_ends_fails_start_up_at_once() -> None:
    """A server answering every ``tools/list`` page with the same cursor fails at once, saying so, instead
    of paging until the handshake times out."""
    start = time.perf_counter()
    executor = ToolExecutor([odd("loopcursor")], Limits(call_timeout_s=10))
    try:
        with pytest.raises(RuntimeError, match="tools/list never ends: the server sent a cursor again"):
            executor.start()
    finally:
        executor.close()
    assert time.perf_counter() - start < 15  # not the 20 s handshake timeout


@pytest.mark.timeout(60)
def test_media_blocks_and_media_tags_in_results_are_no_media_tags_to_ms_swift() -> None:
    """An image or audio block reads ``[image: image/png, 70 B]``, and ``<image>``, ``<video>``, ``<audio>``
    spelt in a result are defused: ms-swift's template counts those tags in every message to place the
    row's media (``_add_default_tags``), so a tag in a tool turn would take the prompt's image there."""
    from swift.template.base import Template
    from swift.template.template_inputs import StdTemplateInputs

    with ToolExecutor([odd("media")], Limits(call_timeout_s=10)) as executor:
        (record,) = executor.execute([ToolCall("media", {})])
    assert record.ok, record.error
    assert record.observation.splitlines() == [
        "[image: image/png, 70 B]",
        "[audio: audio/wav, 1.2 kB]",
        "caption: <\u200bimage> then <\u200bvideo>, and <\u200baudio>.",
    ]
    assert not [tag for tag in Template.special_tokens if tag in record.observation]
    call = '<tool_call>\n{"name": "media", "arguments": {}}\n</tool_call>'
    messages = [
        {"role": "user", "content": "What is in the picture, the clip and the recording?"},
        {"role": "assistant", "content": call},
        {"role": "tool", "content": record.observation},
    ]
    inputs = StdTemplateInputs(messages=messages, images=["a.png"], videos=["b.mp4"], audios=["c.wav"])
    Template._add_default_tags(inputs)  # finds no tag anywhere, so puts one of each before the question
    assert inputs.messages[0]["content"].startswith("<video><audio><image>What is in the picture")


@pytest.mark.timeout(60)
def test_a_tool_that_runs_only_as_an_mcp_task_is_left_out_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``execution.taskSupport: "required"`` (server-everything's ``simulate-research-query``) needs the MCP
    tasks protocol, which this client does not speak: offered, every call would fail "requires task
    augmentation". It is left out with one warning naming it; ``"optional"`` is callable plainly, kept."""
    with (
        caplog.at_level(logging.WARNING, logger="swift_rlfactory.tools.mcp"),
        ToolExecutor([odd("tasks")], Limits(call_timeout_s=10)) as executor,
    ):
        assert sorted(executor.tools) == ["echo", "quick", "struct_error", "weird"]
        assert executor.execute([ToolCall("quick", {"q": 1})])[0].observation == '{"q": 1}'
    (warning,) = [r.getMessage() for r in caplog.records if "research" in r.getMessage()]
    assert "MCP server 'odd'" in warning and "taskSupport: required" in warning, warning


@pytest.mark.timeout(60)
def test_one_tool_with_a_bad_input_schema_costs_only_that_tool(caplog: pytest.LogCaptureFixture) -> None:
    """An ``inputSchema`` that is ``null``, a string, has no ``"type"`` or is an array's drops that tool,
    with a warning naming the server, the tool and the fault; the server's other tools work. It used to
    fail the whole server with "tools.3: Input should be a valid dictionary"."""
    with (
        caplog.at_level(logging.WARNING, logger="swift_rlfactory.tools.mcp"),
        ToolExecutor([odd("badschemas")], Limits(call_timeout_s=10)) as executor,
    ):
        assert sorted(executor.tools) == ["echo", "struct_error", "weird"]
        assert executor.execute([ToolCall("echo", {"x": 3})])[0].observation == '{"x": 3}'
    warnings = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert sorted(warnings) == [
        'MCP server \'odd\': tool \'listy\' dropped: its inputSchema has "type": "array", not "object"',
        "MCP server 'odd': tool 'null_schema' dropped: its inputSchema is null, not a JSON object",
        "MCP server 'odd': tool 'text_schema' dropped: its inputSchema is a str, not a JSON object",
        "MCP server 'odd': tool 'untyped' dropped: its inputSchema has no \"type\" (it must be "
        '{"type": "object", "properties": ...})',
    ]


@pytest.mark.timeout(60)
def test_a_server_that_lists_tools_without_declaring_the_capability_is_used(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server whose ``initialize`` declares no ``tools`` capability but answers ``tools/list`` gets its
    tools used, with a warning saying so; it used to load no tools, silently."""
    with (
        caplog.at_level(logging.WARNING, logger="swift_rlfactory.tools.mcp"),
        ToolExecutor([odd("nocaps")], Limits(call_timeout_s=10)) as executor,
    ):
        assert sorted(executor.tools) == ["echo", "struct_error", "weird"]
        assert executor.execute([ToolCall("echo", {"x": 4})])[0].observation == '{"x": 4}'
    assert any("did not declare the tools capability" in r.getMessage() for r in caplog.records), caplog.text


@pytest.mark.timeout(60)
def test_a_result_its_output_schema_rejects_is_one_short_line() -> None:
    """structuredContent that does not match the tool's ``outputSchema`` is an error observation of one
    line naming the first fault, not the SDK's "raised RuntimeError" and a dump of schema and instance."""
    with ToolExecutor([odd("outschema")], Limits(call_timeout_s=10, retries=0)) as executor:
        typed, echo = executor.execute([ToolCall("typed", {}), ToolCall("echo", {"x": 5})])
    assert typed.observation == (
        "Error: tool 'typed' failed: it returned structured content that does not match its outputSchema: "
        "'result' is a required property"
    )
    assert echo.observation == '{"x": 5}'  # the session is fine


@pytest.mark.timeout(60)
def test_a_malformed_block_of_a_known_type_is_named_by_what_it_lacks() -> None:
    """A text block without ``text`` or a resource without ``text`` or ``blob`` fails its call saying
    which field of which kind of block is wrong, not that the (well-known) type is unknown."""
    with ToolExecutor([odd("badblocks")], Limits(call_timeout_s=10, retries=0)) as executor:
        textless, hollow, echo = executor.execute(
            [ToolCall("textless", {}), ToolCall("hollow", {}), ToolCall("echo", {"x": 3})]
        )
    assert textless.error.endswith("MCP: content.0: 'text' block: text: Field required"), textless.error
    assert hollow.error.endswith("content.0: 'resource' block: resource.text: Field required"), hollow.error
    assert echo.observation == '{"x": 3}'  # the session goes on


@pytest.mark.timeout(60)
def test_a_server_that_sends_a_whole_manual_as_descriptions_is_cut_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A tool description of 200,000 characters (and a parameter's of 50,000) would be in the system prompt
    of every trajectory: each is cut to ``limits.max_description_chars`` with a note saying so, a warning
    names the tool, and what is not prose (a parameter named ``description``, a default) and the call
    itself are untouched."""
    with (
        caplog.at_level(logging.WARNING, logger="swift_rlfactory.tools.toolset"),
        ToolExecutor([odd("huge")], Limits(call_timeout_s=10, max_description_chars=1000)) as executor,
    ):
        [manual] = [s["function"] for s in executor.schemas() if s["function"]["name"] == "manual"]
        q, description = (
            manual["parameters"]["properties"]["q"],
            manual["parameters"]["properties"]["description"],
        )
        assert (
            manual["description"]
            == "M" * 1000 + " [description cut: 200000 characters, the first 1000 shown]"
        )
        assert q["description"] == "Q" * 1000 + " [description cut: 50000 characters, the first 1000 shown]"
        assert description == {"type": "string", "description": "what to file", "default": "D" * 9_000}
        assert len(json.dumps(executor.schemas())) < 14_000  # the rendered tool list, default included
        record = executor.execute([ToolCall("manual", {"q": "x", "description": "y"})])[0]
        assert record.observation == '{"q": "x", "description": "y"}'
    [warning] = [r.getMessage() for r in caplog.records if "max_description_chars" in r.getMessage()]
    assert warning.startswith(
        "tool 'manual' of 'odd': cut to limits.max_description_chars (1000 characters): its description "
        "(200000 characters) and 1 description(s) in its parameters (properties/q);"
    )


@pytest.mark.timeout(60)
def test_without_a_description_cap_the_server_descriptions_are_shown_whole() -> None:
    with ToolExecutor([odd("huge")], Limits(call_timeout_s=10, max_description_chars=None)) as executor:
        [manual] = [s["function"] for s in executor.schemas() if s["function"]["name"] == "manual"]
        assert manual["description"] == "M" * 200_000


@pytest.mark.timeout(60)
def test_binary_resources_and_control_characters_read_as_text_for_a_model() -> None:
    """An embedded binary resource (server-filesystem's ``read_media_file`` on a ``.bin`` file) is named
    and described like an image, its type and decoded size, never base64; and text holding raw control
    characters (``read_text_file`` on a binary file) reaches the model with each run of them visible and
    harmless: a short run as ``\\u00HH`` escapes, a longer one as a count. Tabs and line ends stay."""
    with ToolExecutor([odd("binary")], Limits(call_timeout_s=10, retries=0)) as executor:
        blobs, raw = executor.execute([ToolCall("blobs", {}), ToolCall("rawtext", {})])
    assert blobs.ok and raw.ok, (blobs.error, raw.error)
    assert blobs.observation.splitlines() == [
        "<resource file:///x.bin> [binary: unknown type, 2.4 kB]",
        "<resource file:///a.pdf> [binary: application/pdf, 70 B]",
    ]
    assert raw.observation == "ELF[6 control characters] \\u001b[31mred\\u001b[0m \\u0085\\u009b\r\nend\t."


@pytest.mark.timeout(60)
def test_zod_schema_keywords_for_validators_stay_out_of_the_prompt() -> None:
    """zod-to-json-schema puts ``"$schema": "http://json-schema.org/draft-07/schema#"`` into every tool's
    ``inputSchema``, about 15 tokens a tool in every prompt that tell the model nothing; it is left out of
    the schema the model reads. What says what the arguments are stays: ``additionalProperties``, the
    ``definitions`` a ``$ref`` points into (the XML call format types values through them), ``required``."""
    with ToolExecutor([odd("zod")], Limits(call_timeout_s=10, retries=0)) as executor:
        [zodded] = [s["function"] for s in executor.schemas() if s["function"]["name"] == "zodded"]
        record = executor.execute([ToolCall("zodded", {"path": "a", "depth": 2})])[0]
    assert zodded["parameters"] == {
        "type": "object",
        "properties": {"path": {"type": "string"}, "depth": {"$ref": "#/definitions/depth"}},
        "required": ["path"],
        "additionalProperties": False,
        "definitions": {"depth": {"type": "integer", "minimum": 0}},
    }
    assert record.observation == '{"path": "a", "depth": 2}'


@pytest.mark.timeout(60)
def test_a_server_that_asks_for_input_reads_as_input_a_training_run_cannot_give() -> None:
    """A result of protocol 2026-07-28's ``resultType: "input_required"`` (the server wants the user to fill
    in a form before it goes on) is an error saying so, naming what it asked, whether or not it carries
    the requests the specification asks for; the session goes on serving calls."""
    config = McpServerConfig(command="python", args=[str(RAW_SERVER)])
    with ToolExecutor([McpProvider("raw", config)], Limits(call_timeout_s=20, retries=0)) as executor:
        ask, bare, ok = executor.execute([ToolCall("ask", {}), ToolCall("ask_bare", {}), ToolCall("ok", {})])
    assert not ask.ok and "the server asks for input (elicitation: 'Which account?')" in ask.error, ask.error
    assert "which a training run cannot give" in ask.error
    assert not bare.ok and "the server asks for input, which a training run cannot give" in bare.error, (
        bare.error
    )
    assert ok.observation == "fine"
