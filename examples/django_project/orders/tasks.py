"""The worker's handlers: `skiplock worker --tasks orders.tasks` (with DJANGO_SETTINGS_MODULE set,
the worker calls django.setup() before it imports this module, so the models import as usual)."""

from orders.models import Order
from skiplock import PermanentFailure, task


@task("order-emails")
def send_confirmation(payload: dict) -> None:
    order = Order.objects.get(pk=payload["order_id"])  # the ORM, in the worker
    if order.item == "cursed":
        raise PermanentFailure("the mail server refused this order")  # dead at once, for the console
    order.confirmed = True
    order.save(update_fields=["confirmed"])
