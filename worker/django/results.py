"""A skiplock job read back as Django's TaskResult (the backend's get_result), and what a run stores.

A job's row holds its state, times and every failed attempt's error (jobs.attempt_errors) while it
exists: queued, running, dead, cancelled, and succeeded when history is kept. With the default history
mode a success deletes the row, so the run returns an envelope that the ack stores in job_results, in
the same statement as the success: the task's return value and what the TaskResult needs besides.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from skiplock.django.compat import Task, TaskError, TaskResult, TaskResultStatus

# skiplock's job states as the task framework's: a queued job may be waiting for a retry (it has errors);
# a parked one (a durable wait or sleep) has started and not finished, and runs on once woken
STATUS = {"queued": TaskResultStatus.READY, "waiting": TaskResultStatus.READY, "running": TaskResultStatus.RUNNING,
          "parked": TaskResultStatus.RUNNING, "succeeded": TaskResultStatus.SUCCESSFUL, "dead": TaskResultStatus.FAILED,
          "failed": TaskResultStatus.FAILED}
# The last line of a formatted traceback names the exception: "ValueError: no stock", "shop.tasks.Declined"
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


@dataclass(frozen=True)
class JobRow:
    """What the task_result statement read for one id (worker/core/sql/django_tasks.sql)."""

    status: str | None
    queue: str | None
    priority: int | None
    payload: Any
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    attempts: int | None
    worker_id: str | None
    last_error: str | None
    attempt_errors: list[dict[str, Any]] | None
    stored_state: str | None
    stored: Any
    stored_error: str | None
    stored_at: datetime | None

    @classmethod
    def read(cls, values: Sequence[Any]) -> JobRow:
        """The row from the statement's values. Django's connection hands jsonb back as text (its
        JSONField decodes for itself), a plain psycopg connection as Python values: both are taken."""
        row = cls(*values)
        decoded = {name: json.loads(value) for name in ("payload", "attempt_errors", "stored")
                   if isinstance(value := getattr(row, name), str)}
        return replace(row, **decoded) if decoded else row

    @property
    def exists(self) -> bool:
        return self.status is not None or self.stored_state is not None


def envelope(path: str, backend: str, args: list[Any], kwargs: dict[str, Any], value: Any,
             job: Any) -> dict[str, Any]:
    """What a successful run returns for the ack to store: the value and the TaskResult's fields."""
    return {"task": path, "backend": backend, "args": args, "kwargs": kwargs, "return_value": value,
            "enqueued_at": job.created_at.isoformat(), "started_at": job.started_at.isoformat(),
            "attempts": job.attempt, "worker_id": job.worker_id}


def exception_class_path(traceback_text: str) -> str:
    """The exception's dotted path from its traceback's last line, as Django's backends write it
    ("builtins.ValueError" for a built-in)."""
    for line in reversed(traceback_text.strip().splitlines()):
        match = _EXCEPTION_LINE.match(line)
        if match:
            name = match.group(1)
            return name if "." in name else f"builtins.{name}"
    return "builtins.Exception"  # a text with no exception line: a crash the reaper reported


def errors_of(row: JobRow) -> list[TaskError]:
    """One TaskError per failed attempt the job remembers, oldest first. The newest traceback is taken
    whole from last_error (the attempt history keeps the first 2,000 characters of each)."""
    texts = [str(e.get("error") or "") for e in row.attempt_errors or []]
    if row.last_error:
        if texts:
            texts[-1] = row.last_error
        else:
            texts = [row.last_error]  # a lease that expired: the reaper's reason, no attempt line
    elif row.stored_error and row.stored_state in ("dead", "failed"):
        texts = [row.stored_error]
    return [TaskError(exception_class_path=exception_class_path(t), traceback=t) for t in texts]


def _worker_ids(row: JobRow) -> list[str]:
    """One entry per started attempt (TaskResult.attempts is their count), failed attempts' workers first."""
    attempts = row.attempts or 0
    known = [str(e.get("worker") or "") for e in row.attempt_errors or []][:attempts]
    return known + [row.worker_id or ""] * (attempts - len(known))


def _first_start(row: JobRow) -> datetime | None:
    for entry in row.attempt_errors or []:
        if entry.get("started"):
            return datetime.fromisoformat(str(entry["started"]))
    return row.started_at


def from_row(row: JobRow, task: Task, result_id: str, alias: str) -> TaskResult:
    """The TaskResult of a job whose row still exists."""
    payload = row.payload or {}
    status = STATUS[row.status or "queued"]
    result = TaskResult(task=task, id=result_id, status=status, enqueued_at=row.created_at,
                        started_at=_first_start(row), finished_at=row.finished_at,
                        last_attempted_at=row.started_at, args=payload.get("args", []),
                        kwargs=payload.get("kwargs", {}), backend=alias, errors=errors_of(row),
                        worker_ids=_worker_ids(row))
    if status == TaskResultStatus.SUCCESSFUL and isinstance(row.stored, dict):
        object.__setattr__(result, "_return_value", row.stored.get("return_value"))
    return result


def from_stored(row: JobRow, task: Task, result_id: str, alias: str) -> TaskResult:
    """The TaskResult of a job whose row is gone: the envelope its successful run stored, or a purge's
    tombstone."""
    stored = row.stored if isinstance(row.stored, dict) else {}
    status = STATUS[row.stored_state or "succeeded"]
    started = stored.get("started_at")
    attempts = int(stored.get("attempts") or 0)
    result = TaskResult(task=task, id=result_id, status=status,
                        enqueued_at=_when(stored.get("enqueued_at")), started_at=_when(started),
                        finished_at=row.stored_at, last_attempted_at=_when(started),
                        args=stored.get("args", []), kwargs=stored.get("kwargs", {}), backend=alias,
                        errors=errors_of(row), worker_ids=[str(stored.get("worker_id") or "")] * attempts)
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", stored.get("return_value"))
    return result


def _when(text: Any) -> datetime | None:
    return datetime.fromisoformat(text) if isinstance(text, str) else None
