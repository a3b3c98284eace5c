"""`skiplock.django.SkiplockBackend`: Django's task framework on skiplock's queue.

An enqueue is one INSERT on Django's own connection of the configured database: inside
`transaction.atomic()` it joins that transaction (a rollback leaves no job, no on_commit needed),
outside it commits at once, as Django's own queries do in autocommit. The result id is the job's id.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from skiplock.core.producer import enqueue as skiplock_enqueue
from skiplock.core.sql import queries
from skiplock.django import options as backend_options
from skiplock.django import results
from skiplock.django.compat import (
    BaseTaskBackend,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)
from skiplock.django.database import database_alias
from skiplock.django.runner import find_task

Q = queries("django_tasks")


class SkiplockBackend(BaseTaskBackend):
    """Runs Django tasks on skiplock: retries with backoff, leases, dead letters, the console, workflows."""

    supports_defer = True  # run_after is the job's run_at
    supports_async_task = True  # the worker runs a coroutine function to its end (Task.call)
    supports_get_result = True  # from any process: the job's row, else the result its success stored
    supports_priority = True  # -100..100, higher first: the claim orders by priority DESC

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.config = backend_options.parse(self.options)
        self._database: str | None = None

    @property
    def database(self) -> str:
        """The Django database alias of skiplock's tables (OPTIONS["DATABASE"]), checked on first use."""
        if self._database is None:
            self._database = database_alias(self.options)
        return self._database

    def _connection(self) -> Any:
        from django.db import connections

        return connections[self.database]

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        extras = backend_options.extras_for(self.config, task.module_path, args, kwargs)
        payload = {"task": task.module_path, "args": list(args), "kwargs": dict(kwargs), "backend": self.alias}
        result = TaskResult(task=task, id="", status=TaskResultStatus.READY, enqueued_at=timezone.now(),
                            started_at=None, finished_at=None, last_attempted_at=None, args=payload["args"],
                            kwargs=payload["kwargs"], backend=self.alias, errors=[], worker_ids=[])
        conn = self._connection()
        job_id = skiplock_enqueue(task.queue_name, payload, conn=conn, priority=task.priority,
                                  run_at=task.run_after, **extras)
        if job_id is None:  # its unique_key is held by a job in flight: the caller gets that job
            job_id = self._holder(conn, extras["unique_key"])
        object.__setattr__(result, "id", str(job_id))
        task_enqueued.send(type(self), task_result=result)
        return result

    def _holder(self, conn: Any, key: str) -> int:
        from skiplock.core.plumbing import adapters

        rows = adapters.run_sync(conn, Q.in_flight_by_unique_key, {"key": key})
        if not rows:  # it finished between the two statements: nothing in flight holds the key now
            raise TaskResultDoesNotExist(f"the job holding unique key {key!r} has just finished")
        return int(rows[0][0])

    def get_result(self, result_id: str) -> TaskResult:
        from skiplock.core.plumbing import adapters

        try:
            job_id = int(result_id)
        except (TypeError, ValueError):
            raise TaskResultDoesNotExist(result_id) from None
        rows = adapters.run_sync(self._connection(), Q.task_result, {"id": job_id})
        row = results.JobRow.read(rows[0])
        if not row.exists:
            raise TaskResultDoesNotExist(result_id)
        source = row.payload if row.status is not None else row.stored
        path = source.get("task") if isinstance(source, dict) else None
        if path is None:
            raise TaskResultDoesNotExist(f"job {result_id} is not a Django task's")
        task = find_task(path)
        if row.queue is not None:
            task = task.using(queue_name=row.queue, priority=row.priority)
        if row.status is not None:
            return results.from_row(row, task, result_id, self.alias)
        return results.from_stored(row, task, result_id, self.alias)
