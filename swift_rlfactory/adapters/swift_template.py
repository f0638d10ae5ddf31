"""How a conversation is put to an ms-swift template, shared by training rollouts and evaluation.

The system prompt and tool schemas (:func:`set_system_prompt`), the end-of-turn token dropped before a
tool block (:func:`turn_end_id`) and the tool-call format the prompt asks for (:func:`call_format`) are
decided here once, so evaluation shows the prompt training used (docs/ms-swift.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..tools.calls import HERMES, LLAMA3_JSON, QWEN3_CODER, register, registered
from ..tools.calls.delegated import DelegatedFormat

TURN_END = "<|im_end|>"

CALL_FORMAT_OF = {
    "hermes": HERMES,
    "youtu": HERMES,  # hermes JSON in <tool_call>, without the newlines
    "llama3": LLAMA3_JSON,  # {"name": ..., "parameters": {...}}, after prose or <|python_tag|> too
    "llama4": LLAMA3_JSON,
    "qwen3_coder": QWEN3_CODER,
    "qwen3_5": QWEN3_CODER,
}
"""The ms-swift agent templates whose prompt asks for a format our own parsers read, and that format."""

SWIFT_READS = {
    **dict.fromkeys(("glm4_5", "glm4_7", "glm5_1", "ling3", "seed_oss", "spark2_5"), True),
    **dict.fromkeys(
        (
            "chatglm4",
            "glm4",
            "deepseek_v3_1",
            "deepseek_v4",
            "deepseek_v41",
            "gemma4",
            "hunyuan_hermes",
            "hy_v3",
        )
        + (
            "hy_v3_preview",
            "kimi_k25",
            "kimi_k3",
            "minicpm5",
            "minimax_m2",
            "minimax_m3",
            "mistral",
            "xing4_0",
        )
        + ("qwen_en", "qwen_en_parallel", "qwen_zh", "qwen_zh_parallel", "react_en", "react_grpo", "react_zh")
        + ("toolbench",),
        False,
    ),
}
"""The other ms-swift agent templates, whose calls their own ``get_toolcall`` reads (each checked by a test:
a call rendered as the template renders one reads back, a final answer reads as none), and whether it gives
every argument as text, to be typed by the tool's schema. Any other agent template (a plugin's) is refused
at start-up by :func:`call_format`. The table: docs/tool-calls.md."""
SWIFT_FORMAT = "ms-swift:"
"""The prefix of the name a format read by an ms-swift agent template's ``get_toolcall`` is registered as."""


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


def call_format(template: Any, swift_reader: bool = True) -> str:
    """The tool-call format ``template``'s agent template tells the model to write (``None``: hermes).

    An agent template none of our parsers reads is read by its own ``get_toolcall`` (:data:`SWIFT_READS`),
    registered as the format ``ms-swift:NAME``, unless ``swift_reader`` is off (a served model's structured
    calls are written back as hermes). Raises ``ValueError`` naming the agent template and the supported
    ones when no reader is trusted: a run that cannot read its model's calls must stop before it starts.
    """
    if template is None:
        return HERMES
    name = agent_template_name(template)
    found = CALL_FORMAT_OF.get(name)
    if found is not None:
        return found
    if swift_reader and name in SWIFT_READS:
        return _swift_format(name, template.agent_template)
    template_type = getattr(getattr(template, "template_meta", None), "template_type", None)
    of = f"template {template_type!r}: " if template_type else ""
    supported = [*CALL_FORMAT_OF, *SWIFT_READS] if swift_reader else list(CALL_FORMAT_OF)
    raise ValueError(
        f"{of}agent template {name!r} asks the model for tool calls in a format swift-rlfactory does not "
        f"read; use a template whose agent template is one of {', '.join(supported)} "
        "(ms-swift's --agent_template, or eval's --template)"
    )


def _swift_format(name: str, agent: Any) -> str:
    """The format read by ``agent.get_toolcall``, registered once as ``ms-swift:NAME``; its name."""
    format_name = SWIFT_FORMAT + name
    if registered(format_name) is None:

        def read(text: str) -> list[tuple[str, Any]]:
            return [(function.name, function.arguments) for function in agent.get_toolcall(text)]

        register(DelegatedFormat(format_name, read, typed_values=SWIFT_READS[name]))
    return format_name
