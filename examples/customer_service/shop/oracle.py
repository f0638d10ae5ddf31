"""The oracle agent: the conversation a good agent has for a goal, for the demonstrations and the tests.

``oracle(goal)`` is an engine for the episode loop (``run_episode``): each call returns the next assistant
turn, a question to the customer or a tool call, in the order the policy asks (identify, find the order,
read it, confirm, act, report). Every value it writes was said by the customer or shown by a tool earlier
in the conversation.
"""

from __future__ import annotations

from typing import Any

from swift_rlfactory.rollout.episode import Generate, Generation
from swift_rlfactory.tools.calls import hermes_call

from .tasks import typed_email

RETRY = "I could not find that account. Could you give me your full name and zip code instead?"


def call(tool: str, **arguments: Any) -> str:
    """A tool call in the format the system prompt asks for."""
    return hermes_call(tool, arguments)


def _identify(goal: dict[str, Any]) -> list[str]:
    by_name = call("find_customer", name=goal["name"], zip=goal["zip"])
    if goal["identify_by"] != "email":
        return [by_name]
    if goal.get("email_typo"):  # the mistyped email finds no one: ask for name and zip code instead
        return [call("find_customer", email=typed_email(goal)), RETRY, by_name]
    return [call("find_customer", email=goal["email"])]


def _act(goal: dict[str, Any]) -> list[str]:
    oid, kind = goal["order_id"], goal["type"]
    if kind == "status":
        return [f"Order {oid} is {goal['status']}; its total is {goal['total']}. Is there anything else?"]
    if kind == "cancel_shipped":
        return [
            call(
                "transfer_to_human", summary=f"The customer wants to cancel order {oid}, which has shipped."
            ),
            f"Order {oid} has already shipped, so I cannot cancel it. I have transferred you to a human agent.",
        ]
    if kind in ("cancel", "decline"):
        ask, write = f"Please confirm: cancel order {oid} (yes/no)?", call("cancel_order", order_id=oid)
        done = f"Order {oid} is cancelled and its total will be refunded. Is there anything else?"
        before = []
    elif kind == "return":
        items = ", ".join(f"{i} ({n})" for i, n in zip(goal["items"], goal["item_names"], strict=True))
        before = [f"Which items of order {oid} would you like to return?"]
        ask = f"Please confirm: return {items} of order {oid} for a refund (yes/no)?"
        write = call("return_items", order_id=oid, item_ids=goal["items"])
        done = f"The return of {items} is registered; the refund follows on receipt. Is there anything else?"
    elif kind == "exchange":
        item, option = goal["item_id"], goal["new_option"]
        before = [f"Which item of order {oid} would you like to exchange, and for which option?"]
        ask = f"Please confirm: exchange item {item} ({goal['item_name']}) of order {oid} for {option} (yes/no)?"
        write = call("exchange_item", order_id=oid, item_id=item, new_option=option)
        done = f"Item {item} of order {oid} is now {option}. Is there anything else?"
    else:  # address
        before = ["What is the new shipping address?"]
        ask = f"Please confirm: change the shipping address of order {oid} to {goal['address']} (yes/no)?"
        write = call("change_address", order_id=oid, address=goal["address"])
        done = f"Order {oid} will ship to {goal['address']}. Is there anything else?"
    if not goal["confirm"]:
        return [*before, ask, f"Understood, order {oid} stays as it is. Is there anything else?"]
    return [*before, ask, write, done]


def script(goal: dict[str, Any]) -> list[str]:
    """Every assistant turn of the oracle's conversation for ``goal``, in order."""
    turns = [
        "I can help with that. First I need to identify you: what is the email address on your account?",
        *_identify(goal),
        "Thank you. Which order is it about? Please give me the order id if you have it.",
    ]
    if not goal["knows_order_id"]:
        turns.append(call("list_orders", customer_id=goal["customer_id"]))
    return [*turns, call("get_order", order_id=goal["order_id"]), *_act(goal)]


def oracle(goal: dict[str, Any]) -> Generate:
    """The oracle agent for one goal, as the episode loop calls an engine: each call its next scripted turn
    (the conversation is not read: the scripted customer's answers are known in advance)."""
    turns = iter(script(goal))

    async def generate(messages: list[dict[str, Any]]) -> Generation:
        return Generation(next(turns, "Is there anything else I can help with?"))

    return generate
