"""Placing an order enqueues its confirmation in the same transaction: both commit, or neither."""

from django.db import connection, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.views.decorators.csrf import csrf_exempt

from orders.models import Order
from skiplock import enqueue


@csrf_exempt  # an API endpoint for the example's script; a real form would carry Django's token
def place_order(request: HttpRequest) -> HttpResponse:
    item = request.POST.get("item", "")
    try:
        with transaction.atomic():
            order = Order.objects.create(item=item)
            enqueue("order-emails", {"order_id": order.id}, conn=connection)
            if not item:
                raise ValueError("an order needs an item")  # rolls back the order AND its job
    except ValueError as exc:
        return HttpResponseBadRequest(str(exc))
    return HttpResponse(str(order.id), status=201)
