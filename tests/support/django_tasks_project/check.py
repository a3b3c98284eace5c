"""The Django project's end-to-end check, run by the tests inside a fresh venv with skiplock's wheel:
enqueue in atomic() (rollback leaves none, commit runs), a real `manage.py skiplock_worker` process,
results read back, a failing task's errors, retries with the attempt number, run_after, an async task."""

import asyncio
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
django.setup()

from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402
from shop import tasks  # noqa: E402
from shop.models import Order  # noqa: E402

from skiplock.django.compat import FRAMEWORK, TaskResultDoesNotExist, TaskResultStatus, task_backends  # noqa: E402


def jobs(queue):
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM jobs WHERE queue = %s", [queue])
        return cur.fetchone()[0]


def wait_final(result, timeout=90):
    deadline = time.monotonic() + timeout
    while True:
        result.refresh()
        if result.is_finished:
            return result
        assert worker.poll() is None, "the worker exited"
        assert time.monotonic() < deadline, f"task {result.task.name} is still {result.status}"
        time.sleep(0.1)


backend = task_backends["default"]
assert backend.supports_defer and backend.supports_async_task and backend.supports_get_result
assert backend.supports_priority
print("framework", FRAMEWORK, "Django", django.get_version())

# a rollback takes the order and its job away together: no on_commit involved
try:
    with transaction.atomic():
        order = Order.objects.create(item="kettle")
        tasks.confirm.enqueue(order.id)
        assert jobs("emails") == 1  # in the transaction, the job is there
        raise ValueError("payment declined")
except ValueError:
    pass
assert jobs("emails") == 0 and not Order.objects.filter(item="kettle").exists()

# a commit makes both
with transaction.atomic():
    order = Order.objects.create(item="teapot")
    confirmed = tasks.confirm.enqueue(order.id)
assert confirmed.status == TaskResultStatus.READY and jobs("emails") == 1
later = tasks.add.using(run_after=timezone.now() + timedelta(seconds=3)).enqueue(2, 3)
again = tasks.add.using(run_after=timezone.now() + timedelta(seconds=3)).enqueue(2, 3)
assert again.id == later.id  # OPTIONS unique_key "add-{0}-{1}": the job in flight
failing = tasks.declined.enqueue(order.id)
flaky = tasks.flaky.enqueue(fail_times=1)
doubled = asyncio.run(tasks.async_double.aenqueue(21))

worker = subprocess.Popen([sys.executable, "manage.py", "skiplock_worker", "--concurrency", "4"])
try:
    done = wait_final(confirmed)
    assert done.status == TaskResultStatus.SUCCESSFUL, done.status
    assert done.return_value == {"order": order.id, "item": "teapot"}
    assert Order.objects.get(pk=order.id).confirmed
    assert done.enqueued_at <= done.started_at <= done.finished_at and done.attempts == 1
    fetched = tasks.confirm.get_result(confirmed.id)
    assert fetched.return_value == done.return_value and fetched.args == [order.id]

    failed = wait_final(failing)
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 2, (failed.status, failed.attempts)
    assert [e.exception_class_path for e in failed.errors] == ["shop.tasks.PaymentDeclined"] * 2
    assert failed.errors[-1].exception_class is tasks.PaymentDeclined
    assert "card declined" in failed.errors[-1].traceback and "Traceback" in failed.errors[-1].traceback

    retried = wait_final(flaky)
    assert retried.status == TaskResultStatus.SUCCESSFUL and retried.return_value["attempt"] == 2
    assert retried.return_value["job_id"] == int(flaky.id)

    assert asyncio.run(tasks.async_double.aget_result(doubled.id)).status in (
        TaskResultStatus.READY, TaskResultStatus.RUNNING, TaskResultStatus.SUCCESSFUL)
    assert wait_final(doubled).return_value == 42

    ran = wait_final(later)
    assert ran.return_value == 5 and ran.started_at >= later.enqueued_at + timedelta(seconds=2.5), ran.started_at

    try:
        backend.get_result("999999999")
        raise AssertionError("an unknown id has no result")
    except TaskResultDoesNotExist:
        pass
finally:
    worker.send_signal(signal.SIGTERM)
    code = worker.wait(timeout=60)
assert code == 0, code
print("ok")
