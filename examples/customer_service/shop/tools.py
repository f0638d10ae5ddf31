"""The orders world's tools: look customers and orders up, change pending orders, return delivered ones.

Every tool reads and writes the episode's state (world.py). A write is logged in ``state["log"]`` with
the customer identified at that moment, so the reward can tell a write made before identification or on
another customer's order. Refusals (wrong status, unknown id) are ``ToolError`` observations.
"""

from __future__ import annotations

from typing import Any

from swift_rlfactory.tools import EpisodeState, ToolError, tool


def _order(state: dict[str, Any], order_id: str) -> dict[str, Any]:
    oid = order_id.strip() if order_id.strip().startswith("#") else f"#{order_id.strip()}"
    if oid not in state["orders"]:
        raise ToolError(f"no order {order_id!r}; order ids look like #W1234567")
    return state["orders"][oid]


def _describe(state: dict[str, Any], order: dict[str, Any]) -> str:
    items = "; ".join(
        f"{it['item_id']} {state['products'][it['product']]['name']} ({it['variant']})"
        for it in order["items"]
    )
    return f"{order['id']} status={order['status']} total={order['total']:.2f} address={order['address']!r} items: {items}"


def _write(state: dict[str, Any], action: str, order: dict[str, Any], status: str, **details: Any) -> None:
    if order["status"] != status:
        raise ToolError(f"order {order['id']} is {order['status']}; {action} needs a {status} order")
    state["log"].append(
        {
            "action": action,
            "order": order["id"],
            "identified": state["identified"],
            "owner": order["customer"],
        }
        | details
    )


@tool
def find_customer(state: EpisodeState, email: str = "", name: str = "", zip: str = "") -> str:
    """Find the customer's id, by email or by full name and zip code. Identify the customer before any change.

    Args:
        email: the customer's email address
        name: the customer's full name (with zip)
        zip: the customer's zip code (with name)
    """
    for customer in state["customers"].values():
        by_email = email and customer["email"] == email.strip().lower()
        by_name = (
            name
            and zip
            and customer["name"].lower() == name.strip().lower()
            and customer["zip"] == zip.strip()
        )
        if by_email or by_name:
            state["identified"] = customer["id"]
            return (
                f"customer {customer['id']}: {customer['name']}, {customer['email']}, zip {customer['zip']}"
            )
    raise ToolError("no customer matches; ask for the email, or the full name and zip code")


@tool
def list_orders(customer_id: str, state: EpisodeState) -> str:
    """List a customer's orders with their status and items.

    Args:
        customer_id: the id find_customer returned
    """
    if customer_id not in state["customers"]:
        raise ToolError(f"no customer {customer_id!r}")
    orders = [o for o in state["orders"].values() if o["customer"] == customer_id]
    return "\n".join(_describe(state, o) for o in orders)


@tool
def get_order(order_id: str, state: EpisodeState) -> str:
    """Show one order: status, total, shipping address and items (item ids and variants).

    Args:
        order_id: the order id, like #W1234567
    """
    order = _order(state, order_id)
    return f"{_describe(state, order)} customer={order['customer']}"


@tool
def cancel_order(order_id: str, state: EpisodeState) -> str:
    """Cancel a pending order (only after the customer confirmed).

    Args:
        order_id: the order id, like #W1234567
    """
    order = _order(state, order_id)
    _write(state, "cancel", order, "pending")
    order["status"] = "cancelled"
    return f"{order['id']} cancelled; {order['total']:.2f} refunded"


@tool
def exchange_item(order_id: str, item_id: str, new_option: str, state: EpisodeState) -> str:
    """Swap an item of a pending order for another option of the same product (only after confirmation).

    Args:
        order_id: the order id, like #W1234567
        item_id: the item to swap, as get_order shows it
        new_option: the option wanted: a size, colour or material, like XL or blue
    """
    order = _order(state, order_id)
    item = next((it for it in order["items"] if it["item_id"] == item_id), None)
    if item is None:
        raise ToolError(f"order {order['id']} has no item {item_id!r}")
    variants = state["products"][item["product"]]["variants"]
    new_variant = f"{item['product']}-{new_option.strip().lower()}"
    if new_variant not in variants:
        options = ", ".join(v["option"] for v in variants.values())
        raise ToolError(f"{new_option!r} is not an option of {item['product']}: {options}")
    if not variants[new_variant]["in_stock"]:
        raise ToolError(f"{new_variant} is out of stock")
    _write(state, "exchange", order, "pending", item=item_id, variant=new_variant)
    item["variant"] = new_variant
    return f"{order['id']} item {item_id} is now {new_variant}"


@tool
def change_address(order_id: str, address: str, state: EpisodeState) -> str:
    """Change the shipping address of a pending order (only after confirmation).

    Args:
        order_id: the order id, like #W1234567
        address: the new street address
    """
    order = _order(state, order_id)
    _write(state, "address", order, "pending", address=address)
    order["address"] = address.strip()
    return f"{order['id']} will ship to {order['address']!r}"


@tool
def return_items(order_id: str, item_ids: list[str], state: EpisodeState) -> str:
    """Return items of a delivered order for a refund (only after confirmation).

    Args:
        order_id: the order id, like #W1234567
        item_ids: the items to return, as get_order shows them
    """
    order = _order(state, order_id)
    known = {it["item_id"] for it in order["items"]}
    if not item_ids or not set(item_ids) <= known:
        raise ToolError(f"order {order['id']} items are {', '.join(sorted(known))}")
    _write(state, "return", order, "delivered", items=sorted(item_ids))
    order["status"] = "return requested"
    order["returned"] = sorted(item_ids)
    return f"{order['id']} return requested for {', '.join(sorted(item_ids))}; refund on receipt"


@tool
def transfer_to_human(summary: str, state: EpisodeState) -> str:
    """Hand the conversation to a human agent, for a request the policy does not let you handle.

    Args:
        summary: what the customer wants, in one sentence
    """
    state["transferred"] = summary
    return "transferred; tell the customer a human agent will take over"
