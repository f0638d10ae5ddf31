"""One assistant turn read once for rewards, whatever format its prompt asked for."""

from __future__ import annotations

from dataclasses import dataclass

from .call import Body
from .call_objects import bare_calls
from .json_reader import read_block
from .llama import PYTHON_TAG, unwrapped
from .qwen3_coder import BARE_XML_CALL, FUNCTION, read_xml
from .scanner import scan


@dataclass(frozen=True)
class Reply:
    """One assistant turn read once for rewards: its ``visible`` text (reasoning and ``<tool_call>``
    blocks removed, each block as the parser of its format reads it) and whether it ``writes_call`` in
    any format we read."""

    visible: str
    writes_call: bool


def read_reply(text: str) -> Reply:
    """``text`` scanned once, whatever format its prompt asked for (rewards do not know it).

    A turn writes a call when it has a ``<tool_call>`` block outside its reasoning (JSON or XML, readable
    or not), or, without a block, when its visible reply is nothing but call JSON, starts with
    ``<function=`` or holds Llama's ``<|python_tag|>``. Call objects inside prose are not seen: telling
    them from an answer that quotes JSON takes the tools' names, which a reward does not have. The rules
    in full: docs/tool-calls.md.
    """
    blocks, visible = scan(text, _block)
    rest = "".join(visible)
    if blocks:
        return Reply(rest, True)
    bare = rest.lstrip().startswith(BARE_XML_CALL) or PYTHON_TAG in rest or bool(bare_calls(unwrapped(rest)))
    return Reply(rest, bare)


def _block(text: str, pos: int) -> Body:
    """One ``<tool_call>`` block's body as the parser that runs it reads it: XML when it opens with
    ``<function=`` (without the tools' schemas: a value left untyped is never refused, so the block ends
    where its XML does), else hermes JSON."""
    return read_xml(text, pos, {}) if FUNCTION.match(text, pos) else read_block(text, pos)
