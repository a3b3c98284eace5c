"""The Django project's workflow and durable-wait check, run by the tests inside a fresh venv with skiplock's
wheel: a task enqueued through django.tasks as a workflow's parent, its dependent enqueued with
enqueue_options(depends_on=...) and run after it on the parent's result; a task that parks on
job.wait_for and is woken by skiplock.signal sent inside the caller's atomic() block. One real
`manage.py skiplock_worker` process."""

import os
import signal
import subprocess
import sys
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
django.setup()

from django.db import connection, transaction  # noqa: E402
from shop import tasks  # noqa: E402

import skiplock  # noqa: E402
from skiplock.django import enqueue_options  # noqa: E402
from skiplock.django.compat import TaskResultStatus  # noqa: E402


def job_status(result):
    with connection.cursor() as cur:
        cur.execute("SELECT status::text FROM jobs WHERE id = %s", [int(result.id)])
        row = cur.fetchone()
    return row[0] if row else None


def wait(condition, what, timeout=90):
    deadline = time.monotonic() + timeout
    while not condition():
        assert worker.poll() is None, "the worker exited"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def wait_final(result):
    wait(lambda: result.refresh() or result.is_finished, f"task {result.task.name} to finish")
    return result


# the parent and its dependent, enqueued before any worker runs: the child waits for its parent
parent = tasks.monthly_totals.enqueue("2026-11")
with enqueue_options(depends_on=[parent]):
    child = tasks.publish_report.enqueue("2026-11")
assert job_status(child) == "waiting", job_status(child)
approval = tasks.ship_when_approved.enqueue(7)

worker = subprocess.Popen([sys.executable, "manage.py", "skiplock_worker", "--concurrency", "4"])
try:
    done_parent = wait_final(parent)
    assert done_parent.status == TaskResultStatus.SUCCESSFUL, done_parent.status
    done_child = wait_final(child)
    assert done_child.status == TaskResultStatus.SUCCESSFUL, (done_child.status, done_child.errors)
    assert done_child.return_value == {"month": "2026-11", "parents": [{"month": "2026-11", "total": 1250}]}, \
        done_child.return_value
    assert done_child.started_at >= done_parent.finished_at, (done_child.started_at, done_parent.finished_at)

    # the durable task parks on its wait; a signal sent in a rolled-back transaction wakes nothing
    wait(lambda: job_status(approval) == "parked", "the approval task to park on its wait")
    approval.refresh()
    assert not approval.is_finished, approval.status
    try:
        with transaction.atomic():
            skiplock.signal("approval-7", {"approved": False}, conn=connection)
            raise ValueError("the approver changed their mind")
    except ValueError:
        pass
    assert job_status(approval) == "parked", job_status(approval)
    with transaction.atomic():
        assert skiplock.signal("approval-7", {"approved": True, "by": "ops"}, conn=connection) == 1
    shipped = wait_final(approval)
    assert shipped.status == TaskResultStatus.SUCCESSFUL, (shipped.status, shipped.errors)
    assert shipped.return_value["decision"] == {"approved": True, "by": "ops"}, shipped.return_value
    assert shipped.return_value["order"] == 7
finally:
    worker.send_signal(signal.SIGTERM)
    code = worker.wait(timeout=60)
assert code == 0, code
print("ok")
