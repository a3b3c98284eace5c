"""The worker side: the skiplock handler that runs a Django task, and the worker a management command starts.

A job's payload names its task by import path ({"task": "shop.tasks.send_receipt", "args": [...],
"kwargs": {...}, "backend": "default"}); one handler per queue imports it and calls it, so a worker needs
no list of tasks. Around every run it closes the database connections Django considers stale, as
Django's request cycle does at each request's start and end (request_started / request_finished), so a
long-lived worker survives a restarted database and honours CONN_MAX_AGE.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from skiplock.core.errors import Park, PermanentFailure, Snooze
from skiplock.core.registry import REGISTRY, Task
from skiplock.django import results
from skiplock.django.compat import (
    Task as DjangoTask,
)
from skiplock.django.compat import (
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_finished,
    task_started,
)
from skiplock.django.context import SkiplockTaskContext

log = logging.getLogger("skiplock.django")


def find_task(path: Any) -> DjangoTask:
    """The Task object at `path` (what @task made of a module-level function); PermanentFailure if none is."""
    from django.utils.module_loading import import_string

    if not isinstance(path, str) or not path:
        raise PermanentFailure(f"the job's payload names no task: {path!r}")
    try:
        found = import_string(path)
    except ImportError as exc:
        raise PermanentFailure(f"no task at {path!r}: {exc}") from None
    if not isinstance(found, DjangoTask):
        raise PermanentFailure(f"{path!r} is {type(found).__name__}, not a task: decorate it with @task")
    return found


def run_django_task(payload: Any, job: Any) -> dict[str, Any]:
    """The skiplock handler of every Django queue: run the payload's task; return what the ack stores."""
    from django.db import close_old_connections

    close_old_connections()
    try:
        task = find_task(payload.get("task") if isinstance(payload, dict) else None)
        args, kwargs = list(payload.get("args") or []), dict(payload.get("kwargs") or {})
        alias = str(payload.get("backend") or task.backend)
        running = TaskResult(task=task, id=str(job.id), status=TaskResultStatus.RUNNING, enqueued_at=job.created_at,
                             started_at=job.started_at, finished_at=None, last_attempted_at=job.started_at,
                             args=args, kwargs=kwargs, backend=alias, errors=[],
                             worker_ids=[job.worker_id] * job.attempt)
        task_started.send(type(task.get_backend()), task_result=running)
        try:
            if task.takes_context:
                value = task.call(SkiplockTaskContext(task_result=running, job=job), *args, **kwargs)
            else:
                value = task.call(*args, **kwargs)
            # what every task backend stores: JSON, or the run fails saying why (never a silent None)
            value = normalize_json(value)
        except (Park, Snooze):
            # a durable wait or sleep, or a snooze: the run stops here and the task runs again later,
            # so it has not finished (Django's task_finished would log it as FAILED, with a traceback)
            raise
        except BaseException:
            object.__setattr__(running, "status", TaskResultStatus.FAILED)
            task_finished.send(type(task.get_backend()), task_result=running)
            raise
        object.__setattr__(running, "status", TaskResultStatus.SUCCESSFUL)
        task_finished.send(type(task.get_backend()), task_result=running)
        return results.envelope(task.module_path, alias, args, kwargs, value, job)
    finally:
        close_old_connections()


def register_queues(queues: Sequence[str], queue_limits: dict[str, dict[str, Any]]) -> None:
    """One skiplock handler per Django queue, with the queue's limits from OPTIONS["queues"]."""
    from skiplock.core.features import limits

    for queue in queues:
        conf = queue_limits.get(queue) or {}
        rate = conf.get("rate")
        REGISTRY.add(Task(queue, run_django_task, wants_job=True, lease_seconds=conf.get("lease"),
                          concurrency=conf.get("concurrency"),
                          rate=limits.parse_rate(rate) if rate is not None else None))
