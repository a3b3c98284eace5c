"""The worker's handlers: `skiplock worker --tasks tasks`. Async, with the same async ORM as the app."""

from __future__ import annotations

from typing import Any

from models import Order, Session

from skiplock import PermanentFailure, task


@task("order-emails")
async def send_confirmation(payload: dict[str, Any]) -> None:
    async with Session.begin() as session:
        order = await session.get(Order, payload["order_id"])
        if order is None or order.item == "cursed":
            raise PermanentFailure("the mail server refused this order")  # dead at once, for the console
        order.confirmed = True
