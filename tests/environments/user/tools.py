"""The order book the agent of the simulated-user tests looks orders up in."""

from swift_rlfactory.tools import tool

ORDERS = {"A-17": "shipped", "B-42": "delayed"}


@tool
def order_status(order_id: str) -> str:
    """The status of an order.

    Args:
        order_id: the order's number, e.g. A-17
    """
    return ORDERS.get(order_id, "no such order")
