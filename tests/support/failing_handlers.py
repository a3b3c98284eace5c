"""Handlers that fail the way real code fails, for dead-letter tests: each raises a different kind of
exception with a message that carries the job's own order number, URL or key."""

from __future__ import annotations

from typing import Any

from skiplock import task


class PaymentDeclined(Exception):
    """A custom exception class, as an application defines its own."""


def _call_the_api(order: int) -> None:
    # one frame deeper, so the traceback is a real multi-line one
    raise ConnectionError(f"POST https://api.example.com/orders/{order}?attempt=1: 503")


@task("orders")
def process_order(payload: dict[str, Any]) -> None:
    order = int(payload["order"])
    kind = payload["kind"]
    if kind == "connection":
        _call_the_api(order)
    if kind == "value":
        raise ValueError(f"order {order} has no shipping address")
    if kind == "key":
        # a KeyError, as a lookup in real code raises it
        stock: dict[str, int] = {}
        _ = stock[f"sku-{order}"]
    if kind == "customer":
        # a Stripe-style prefixed id in the message: one group, not one per customer
        raise ValueError(f"customer cus_{order} has no default payment method")
    if kind == "missing":
        # a lookup of a named field: the field's name is the bug, so 'email' and 'phone' stay apart
        contact: dict[str, str] = {}
        _ = contact[payload["field"]]
    if kind == "chained":
        try:
            int(f"x{order}")
        except ValueError as exc:
            raise PaymentDeclined(f"card ending {order:04d} declined") from exc
