"""The worker's handlers: `skiplock worker --tasks orders.tasks` (with DJANGO_SETTINGS_MODULE set)."""

import django

# The worker process is not Django's: set Django up before the models are imported.
django.setup()

from orders.models import Order  # noqa: E402  (after django.setup(), on purpose)
from skiplock import PermanentFailure, task  # noqa: E402


@task("order-emails")
def send_confirmation(payload: dict) -> None:
    order = Order.objects.get(pk=payload["order_id"])  # the ORM, in the worker
    if order.item == "cursed":
        raise PermanentFailure("the mail server refused this order")  # dead at once, for the console
    order.confirmed = True
    order.save(update_fields=["confirmed"])
