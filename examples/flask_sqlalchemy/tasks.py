"""The worker's handlers: `skiplock worker --tasks tasks`, using the app's Flask-SQLAlchemy models."""

from __future__ import annotations

from typing import Any

from app import Order, create_app, db

from skiplock import PermanentFailure, task

app = create_app()  # the handlers need the app's context for db.session


@task("order-emails")
def send_confirmation(payload: dict[str, Any]) -> None:
    with app.app_context():
        order = db.session.get(Order, payload["order_id"])
        if order is None or order.item == "cursed":
            raise PermanentFailure("the mail server refused this order")  # dead at once, for the console
        order.confirmed = True
        db.session.commit()
