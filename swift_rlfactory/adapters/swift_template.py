"""How a conversation is put to an ms-swift template, shared by training rollouts and evaluation.

The system prompt and tool schemas (:func:`set_system_prompt`), the end-of-turn token dropped before a
tool block (:func:`turn_end_id`) and the tool-call format the prompt asks for (:func:`call_format`) are
decided here once, so evaluation shows the prompt training used (docs/ms-swift.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..tools.call_formats import HERMES, LLAMA3_JSON, QWEN3_CODER

TURN_END = "<|im_end|>"

CALL_FORMAT_OF = {
    "hermes": HERMES,
    "youtu": HERMES,  # hermes JSON in <tool_call>, without the newlines
    "llama3": LLAMA3_JSON,  # {"name": ..., "parameters": {...}}, after prose or <|python_tag|> too
    "llama4": LLAMA3_JSON,
    "qwen3_coder": QWEN3_CODER,
    "qwen3_5": QWEN3_CODER,
}
"""The ms-swift agent templates whose prompt asks for a format we read, and that format; any other
is refused at start-up by :func:`call_format` (why: docs/ms-swift.md)."""


def with_system_prompt(
    messages: list[dict[str, Any]], template: Any, prompt: str | None, tools: list[dict] | None
) -> list[dict[str, Any]]:
    """A copy of ``messages`` with :func:`set_system_prompt` applied: an episode's first prompt."""
    messages = [dict(m) for m in messages]
    set_system_prompt(messages, template, prompt, tools)
    return messages


def set_system_prompt(
    messages: list[dict[str, Any]], template: Any, prompt: str | None, tools: list[dict] | None
) -> None:
    """Merge ``prompt`` into the conversation's system message and render ``tools`` into it, in place.

    Which system message wins and why a second pass is harmless (except Llama 3's): docs/ms-swift.md.
    """
    default = getattr(getattr(template, "template_meta", None), "default_system", None)
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    system = None
    if messages and messages[0].get("role") == "system":
        system = messages[0].get("content") or None
        if tools and system and (not prompt or prompt in system):
            # the block these tools render to, found in the system text: it was rendered already (a copy
            # of the user message: some agent templates, Llama 3's, write the tools into it)
            probe = dict(first_user) if first_user else None
            block = template.agent_template._format_tools(tools, "", probe).strip()
            if block and block in system:
                return
        messages.pop(0)
    if system == default:
        system = None
    if prompt and system and prompt not in system:
        system = f"{prompt}\n\n{system}"
    elif prompt and not system:
        system = prompt
    system = system or default
    if tools:
        system = template.agent_template._format_tools(tools, system, first_user)
    if system:
        messages.insert(0, {"role": "system", "content": system})


def turn_end_id(tokenizer: Any, template: Any) -> int | None:
    """The end-of-turn token that ChatML templates render again before a tool block, if any."""
    chat_sep = getattr(getattr(template, "template_meta", None), "chat_sep", None) or []
    first = chat_sep[0] if chat_sep and isinstance(chat_sep[0], str) else ""
    if tokenizer is None or not first.startswith(TURN_END):
        return None
    return tokenizer.convert_tokens_to_ids(TURN_END)


@dataclass
class TemplateByName:
    """What :func:`set_system_prompt` reads from a template, without loading a tokenizer."""

    template_meta: Any
    agent_template: Any


def template_by_name(template_type: str | None) -> TemplateByName:
    """The system-prompt rules of ms-swift template ``template_type`` (e.g. ``qwen3``; ``None``: hermes
    tools, no default system prompt), for models served elsewhere.
    """
    from swift.agent_template import agent_template_map
    from swift.template import TEMPLATE_MAPPING

    if template_type is None:
        return TemplateByName(template_meta=None, agent_template=agent_template_map["hermes"]())
    if template_type not in TEMPLATE_MAPPING:
        raise ValueError(f"unknown ms-swift template {template_type!r}")
    meta = TEMPLATE_MAPPING[template_type]
    name = meta.agent_template or "hermes"
    return TemplateByName(template_meta=meta, agent_template=agent_template_map[name]())


def agent_template_name(template: Any) -> str:
    """The ms-swift registry name of ``template``'s agent template (``hermes`` when it has none).

    A template whose agent template is not one of ms-swift's own classes (a plugin's) is named by its class.
    """
    from swift.agent_template import agent_template_map

    agent = getattr(template, "agent_template", None)
    if agent is None:
        return "hermes"
    for name, cls in agent_template_map.items():
        if type(agent) is cls:
            return name
    return type(agent).__name__


def call_format(template: Any) -> str:
    """The tool-call format ``template``'s agent template tells the model to write (``None``: hermes).

    Raises ``ValueError`` naming the agent template and the supported ones when no parser of ours reads it.
    """
    if template is None:
        return HERMES
    name = agent_template_name(template)
    found = CALL_FORMAT_OF.get(name)
    if found is None:
        template_type = getattr(getattr(template, "template_meta", None), "template_type", None)
        of = f"template {template_type!r}: " if template_type else ""
        raise ValueError(
            f"{of}agent template {name!r} asks the model for tool calls in a format swift-rlfactory does not "
            f"read; use a template whose agent template is one of {', '.join(CALL_FORMAT_OF)} "
            "(ms-swift's --agent_template, or eval's --template)"
        )
    return found
