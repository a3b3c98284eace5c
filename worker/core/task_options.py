"""@task options for jobs whose producer could not know them: marked at enqueue, filled in by a worker.

A producer writes a task's enqueue-time options (max_attempts, version, lock_key) into each job: from
its own @task when it imports the task module, else from the queue's task_defaults row, which the
workers write when they start (worker/core/task_defaults.py). Before any worker of the queue has
started there is no row, as in a tutorial that enqueues first and starts its worker afterwards. Such a
job is marked with the options it lacks (jobs.task_options_unknown, migration 049), and a worker of
its queue writes them in from its task: when it starts, before its first claim, and every
FILL_IN_SECONDS after (a producer keeps a missing row for task_defaults.CACHE_SECONDS). What the caller
gave is never marked, so it is never replaced.

Why marks rather than a change at claim: the claim is every job's hot path, and the console and the
reaper read max_attempts from the row. A mark costs nothing where options are known (NULL), and the
filling-in reads only marked rows, through a partial index.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from skiplock.core import task_defaults
from skiplock.core.sql import queries

SQL = queries("task_options")
log = logging.getLogger("skiplock.worker")

UNKNOWN_MAX_ATTEMPTS = 1
UNKNOWN_VERSION = 2
UNKNOWN_LOCK_KEY = 4

FILL_IN_SECONDS = 15.0  # how often a running worker fills in jobs marked after it started
LOCK_KEY_PAGE = 500  # jobs per statement whose lock_key is computed here from their payload


def unknown_bits(queue: Any, registered: Any, *, max_attempts: Any, lock_key: Any, version: Any) -> int | None:
    """The options a producer lacks for one job: those the caller left out, when this process has neither
    the queue's task (`registered`) nor its task_defaults row. None when nothing is missing."""
    if registered is not None or not isinstance(queue, str) or task_defaults.known(queue) is not None:
        return None
    bits = ((UNKNOWN_MAX_ATTEMPTS if max_attempts is None else 0) | (UNKNOWN_VERSION if version is None else 0)
            | (UNKNOWN_LOCK_KEY if lock_key is None else 0))
    return bits or None


def fill_in(conn: Any, tasks: Iterable[Any]) -> int:
    """Write each task's options into its queue's marked jobs (tasks: skiplock.core.registry.Task);
    return how many jobs changed."""
    rows = list(tasks)
    if not rows:
        return 0
    cur = conn.execute(SQL.fill_in, {
        "queues": [t.queue for t in rows],
        "max_attempts": [t.max_attempts for t in rows],
        "versions": [t.version for t in rows],
        "lock_keys": [t.lock_key if isinstance(t.lock_key, str) else None for t in rows],
        "computed": [callable(t.lock_key) for t in rows],
    })
    changed = max(cur.rowcount, 0)
    for task in rows:
        if callable(task.lock_key):
            changed += _computed_lock_keys(conn, task)
    return changed


def _computed_lock_keys(conn: Any, task: Any) -> int:
    """Run the task's lock_key function on its marked jobs' payloads, a page at a time."""
    done = 0
    while True:
        with conn.transaction():
            page = conn.execute(SQL.lacking_lock_key, {"queue": task.queue, "limit": LOCK_KEY_PAGE}).fetchall()
            if not page:
                return done
            keys = [_lock_key(task, job_id, payload) for job_id, payload in page]
            conn.execute(SQL.fill_in_lock_keys, {"ids": [row[0] for row in page], "lock_keys": keys})
        done += len(page)
        if len(page) < LOCK_KEY_PAGE:
            return done


def _lock_key(task: Any, job_id: int, payload: Any) -> str | None:
    """The task's lock_key for one payload; a function that fails or returns no text leaves the job
    without a lock (a log line says which), as the job already was."""
    try:
        key = task.lock_key(payload)
    except Exception as exc:  # the user's function: say whose it is and go on with the others
        log.warning("@task(%r) lock_key function failed on job %s: %s: %s", task.queue, job_id,
                    type(exc).__name__, exc)
        return None
    return key if isinstance(key, str) and key else None
