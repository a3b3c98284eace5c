"""A worker process's own row in `workers` (core/sql/workers.sql): written with its heartbeat, read by the
console's workers page, removed at a clean exit, and forgotten by the reaper long after a crash."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg

from skiplock.core.sql import queries

WORKERS_SQL = queries("workers")
WAITERS_SQL = queries("waiters")


def heartbeat(conn: psycopg.Connection[Any], worker_id: str, *, host: str, pid: int, queues: Sequence[str],
              concurrency: int, in_flight: int, task_versions: dict[str, int]) -> tuple[str, str] | None:
    """Register or refresh this worker's row; the (command, by whom) an operator left for it, if any."""
    row = conn.execute(WORKERS_SQL.worker_upsert, {
        "id": worker_id, "host": host, "pid": pid, "queues": list(queues), "concurrency": concurrency,
        "in_flight": in_flight, "task_versions": json.dumps(task_versions)}).fetchone()
    return (str(row[0]), str(row[1])) if row and row[0] else None


def remove(conn: psycopg.Connection[Any], worker_id: str) -> None:
    """A clean exit: this worker's waiter tokens (those no producer holds) and its row go."""
    conn.execute(WAITERS_SQL.waiter_unregister, {"id": worker_id})
    conn.execute(WORKERS_SQL.worker_delete, {"id": worker_id})


def prune_stale(conn: psycopg.Connection[Any], older_than: float) -> int:
    """The reaper's part: forget workers silent for `older_than` s (their jobs were reaped by lease expiry)."""
    return conn.execute(WORKERS_SQL.worker_prune_stale, {"older_than": older_than}).rowcount or 0
