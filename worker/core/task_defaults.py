"""@task options that travel with the job, for producers that do not import the task.

Where each option of @task takes effect, and so whether a producer without the task module loses it:
- written into the job at enqueue: `max_attempts`, `version`, `lock_key`. A worker writes them to the
  `task_defaults` table (migration 027) when it starts; a producer that has no handler registered
  for the queue reads them from there. A lock_key *function* cannot be run from a row: such a
  producer is refused (EnqueueError) rather than enqueueing without the lock, and must import the
  task module or pass lock_key= itself.
- applied by the worker that runs the job, so never lost: `lease`, `concurrency` and `rate` (written
  to queue_limits at start), `upgrade`, `on_failure`/`on_dead`, and `every`/`cron`/`timezone`/`catch_up`.

Why a table read at enqueue rather than a change at claim: the claim is the hot path of every job,
and rewriting max_attempts there would also be too late for the console and the reaper, which read
the row before the first claim. Here a producer that imports the task pays nothing (the registry
answers first); one that does not pays a dict lookup per job and one indexed SELECT per queue per
CACHE_SECONDS, made on the connection the INSERT uses (so `conn=` callers need no DATABASE_URL).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

CACHE_SECONDS = 60.0  # how long a producer keeps a queue's row (a worker restart's options show after this)

PUBLISH = """
INSERT INTO task_defaults (queue, max_attempts, version, lock_key, lock_key_computed, updated_by)
SELECT * FROM unnest(%(queues)s::text[], %(max_attempts)s::int[], %(versions)s::int[], %(lock_keys)s::text[],
                     %(computed)s::boolean[], %(by)s::text[])
ON CONFLICT (queue) DO UPDATE
   SET max_attempts = EXCLUDED.max_attempts, version = EXCLUDED.version, lock_key = EXCLUDED.lock_key,
       lock_key_computed = EXCLUDED.lock_key_computed, updated_by = EXCLUDED.updated_by, updated_at = now()
"""

# A producer may run against a database not yet migrated to 027: an error would abort the caller's
# transaction, so the table's presence is asked first (once per refresh, not per job).
TABLE_EXISTS = "SELECT to_regclass('task_defaults') IS NOT NULL"

LOOKUP = """
SELECT queue, max_attempts, version, lock_key, lock_key_computed FROM task_defaults WHERE queue = ANY(%(queues)s)
"""


class TaskDefaults(NamedTuple):
    """One queue's row: what a producer without the task writes into its jobs."""

    max_attempts: int | None
    version: int
    lock_key: str | None
    lock_key_computed: bool


_cache: dict[str, tuple[float, TaskDefaults | None]] = {}
_lock = threading.Lock()


def publish(conn: Any, tasks: Iterable[Any], worker_id: str | None = None) -> None:
    """At worker start: write each task's enqueue-time options (tasks: skiplock.core.registry.Task)."""
    rows = list(tasks)
    if not rows:
        return
    conn.execute(PUBLISH, {
        "queues": [t.queue for t in rows],
        "max_attempts": [t.max_attempts for t in rows],
        "versions": [t.version for t in rows],
        "lock_keys": [t.lock_key if isinstance(t.lock_key, str) else None for t in rows],
        "computed": [callable(t.lock_key) for t in rows],
        "by": [worker_id for _ in rows],
    })


def stale(queues: Iterable[Any]) -> list[str]:
    """The queues among `queues` whose row this process has not read in the last CACHE_SECONDS."""
    now = time.monotonic()
    return sorted({q for q in queues if isinstance(q, str) and not (q in _cache and _cache[q][0] > now)})


def remember(queues: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Store LOOKUP's rows for `queues` (a queue without a row is remembered as having none)."""
    found = {row[0]: TaskDefaults(row[1], row[2], row[3], row[4]) for row in rows}
    until = time.monotonic() + CACHE_SECONDS
    with _lock:
        for queue in queues:
            _cache[queue] = (until, found.get(queue))


def known(queue: Any) -> TaskDefaults | None:
    """The remembered row of `queue`, if any (call after refreshing stale() queues)."""
    entry = _cache.get(queue) if isinstance(queue, str) else None
    return entry[1] if entry is not None else None


def forget() -> None:
    """Drop every remembered row (tests; a process that knows the workers just changed)."""
    with _lock:
        _cache.clear()
