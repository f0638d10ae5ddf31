"""The scripted customer: answers the agent from the hidden goal (``user_goal``), deterministically.

It gives what it is asked for (email or name and zip, the order id or a description of the order, the
item and option, the new address; with the goal's ``email_typo`` it mistypes the email the first time),
says yes to a confirmation only when it names the goal's order and change (and the goal confirms), and
ends with the stop marker once the goal is done, declined, or the agent transferred it. Each kind of reply
has several wordings, one chosen per goal (the same goal always gets the same words), so that the
demonstrations do not teach one customer's words only. The ``user:`` block of env.yaml names it as
``users.py:Customer``.
"""

from __future__ import annotations

import zlib
from typing import Any

from shop.tasks import typed_email

STOP = "###STOP###"
DONE = {  # how a tool observation reports each goal done
    "cancel": " cancelled;",
    "return": " return requested ",
    "exchange": " is now ",
    "address": " will ship to ",
}
CONFIRM_WORDS = ("confirm", "yes/no", "(yes or no)", "shall i", "should i", "do you want me")
WORDINGS = {  # each reply's wordings; shop.rewards reads every "yes" as a yes and every "no" as a no
    "email": ("My email is {email}.", "{email}", "It's {email}.", "The email on my account is {email}."),
    "name_zip": (
        "My name is {name} and my zip code is {zip}.",
        "{name}, zip code {zip}.",
        "The name is {name} and the zip code is {zip}.",
    ),
    "forgot": ("I don't remember which email I used. ", "I'm not sure which email I used. "),
    "order_id": ("It's order {order_id}.", "{order_id}", "The order id is {order_id}."),
    "no_order_id": (
        "I don't have the number. It's {description}.",
        "I don't know the id; it's {description}.",
    ),
    "yes": ("Yes, please go ahead.", "yes", "Yes.", "Yes, please do."),
    "no": ("No, please don't do that.", "no", "No, thanks."),
    "done": ("Thank you, that's all.", "That's all, thanks.", "Great, thank you."),
}


def say(goal: dict[str, Any], kind: str, **facts: str) -> str:
    """The goal's wording of a reply of ``kind``, filled with ``facts``."""
    options = WORDINGS[kind]
    key = f"{goal.get('customer_id')}|{goal.get('order_id')}|{kind}"
    return options[zlib.crc32(key.encode()) % len(options)].format(**facts)


def _last(messages: list[dict[str, Any]], role: str) -> str:
    return next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == role), "")


def _done(goal: dict[str, Any], messages: list[dict[str, Any]]) -> bool:
    tools = [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]
    if any(t.startswith("transferred") for t in tools):
        return True
    kind = goal["type"]
    if kind in DONE:
        return any(t.startswith(goal["order_id"]) and DONE[kind] in t for t in tools)
    if kind == "status":
        said = _last(messages, "assistant")
        return goal["status"] in said and goal["total"] in said
    if kind == "decline":
        no = say(goal, "no")
        return any(m.get("role") == "user" and m.get("content") == no for m in messages)
    return False


def _matches(goal: dict[str, Any], text: str) -> bool:
    """Whether a confirmation question describes exactly the goal's change."""
    if goal["order_id"] not in text:
        return False
    kind, lower = goal["type"], text.lower()
    if kind in ("cancel", "decline", "cancel_shipped"):
        return "cancel" in lower
    if kind == "return":
        return "return" in lower and all(item in text for item in goal["items"])
    if kind == "exchange":
        return goal["item_id"] in text and f" {goal['new_option'].lower()}" in lower
    if kind == "address":
        return goal["address"] in text
    return False


def _identity(goal: dict[str, Any], asked: str, messages: list[dict[str, Any]]) -> str:
    name_zip = say(goal, "name_zip", name=goal["name"], zip=goal["zip"])
    if "email" not in asked:
        return name_zip
    if goal["identify_by"] == "name_zip":
        return say(goal, "forgot") + name_zip
    typed = typed_email(goal)
    typed_before = any(m.get("role") == "user" and typed in str(m.get("content")) for m in messages)
    return say(goal, "email", email=goal["email"] if typed_before else typed)


def _request(goal: dict[str, Any]) -> str:
    kind = goal["type"]
    if kind == "return":
        return f"I'd like to return the {' and the '.join(goal['item_names'])}."
    if kind == "exchange":
        return f"The {goal['item_name']}: I'd like it in {goal['new_option']} instead."
    if kind == "address":
        return f"Please ship it to {goal['address']}."
    return goal["opening"]


def reply(goal: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    """The customer's next message, from the goal and the conversation so far."""
    if _done(goal, messages):
        return f"{say(goal, 'done')} {STOP}"
    asked = _last(messages, "assistant")
    lower = asked.lower()
    if any(word in lower for word in CONFIRM_WORDS):
        return say(goal, "yes" if goal["confirm"] and _matches(goal, asked) else "no")
    if "email" in lower or "zip" in lower or "your name" in lower:
        return _identity(goal, lower, messages)
    if "order id" in lower or "order number" in lower or "which order" in lower:
        if goal["knows_order_id"]:
            return say(goal, "order_id", order_id=goal["order_id"])
        return say(goal, "no_order_id", description=goal["description"])
    if any(word in lower for word in ("which item", "option", "address", "which product")):
        return _request(goal)
    return goal["opening"]


class Customer:
    """The scripted user as the simulated-user hook expects: one instance, ``reply(goal, messages)``."""

    def reply(self, goal: dict[str, Any], messages: list[dict[str, Any]]) -> str:
        """The customer's next message."""
        return reply(goal, messages)
