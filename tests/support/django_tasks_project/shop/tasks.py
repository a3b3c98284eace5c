"""The project's tasks, written against Django's task API only."""

try:
    from django.tasks import task
except ImportError:  # Django < 6: the django-tasks backport
    from django_tasks import task

from shop.models import Order


class PaymentDeclined(Exception):
    pass


@task(queue_name="emails")
def confirm(order_id):
    order = Order.objects.get(pk=order_id)  # the ORM, in the worker
    order.confirmed = True
    order.save(update_fields=["confirmed"])
    return {"order": order_id, "item": order.item}


@task()
def add(a, b):
    return a + b


@task()
def declined(order_id):
    raise PaymentDeclined(f"order {order_id}: card declined")


@task(takes_context=True)
def flaky(context, fail_times):
    # fails its first attempts, then reports which attempt succeeded
    if context.attempt <= fail_times:
        raise RuntimeError(f"attempt {context.attempt} fails")
    return {"attempt": context.attempt, "job_id": context.job.id}


@task(priority=10)
async def async_double(n):
    return n * 2


@task()
def monthly_totals(month):
    return {"month": month, "total": 1250}


@task(takes_context=True)
def publish_report(context, month):
    # a workflow's child: it runs once its parent has succeeded, and reads the parent's return value
    return {"month": month, "parents": list(context.parent_results.values())}


@task(takes_context=True)
def ship_when_approved(context, order_id):
    # durable: the job parks until skiplock.signal("approval-<id>") is sent, then runs on from here
    decision = context.job.wait_for(f"approval-{order_id}", timeout=300)
    return {"order": order_id, "decision": decision, "attempt": context.attempt}
