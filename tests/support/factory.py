"""Insert jobs in any state for console tests (River's testfactory idea). Test setup only."""

from __future__ import annotations

import json
from typing import Any

import psycopg


def make_job(conn: psycopg.Connection, queue: str = "t1", status: str = "queued", *, payload: Any = None,
             last_error: str | None = None, attempts: int = 0, max_attempts: int = 5, run_in: float = 0.0,
             unique_key: str | None = None, priority: int = 0, worker_id: str = "w-test",
             lease_in: float = 30.0, finished_ago: float = 0.0) -> int:
    """One job row in `status`, with the columns that state requires; returns its id."""
    running = status == "running"
    final = status in ("succeeded", "failed", "dead")
    row = conn.execute(
        """INSERT INTO jobs (queue, status, payload, last_error, attempts, max_attempts, run_at, unique_key,
                             priority, worker_id, lease_until, started_at, finished_at)
           VALUES (%s, %s::job_status, %s::jsonb, %s, %s, %s, now() + make_interval(secs => %s), %s, %s,
                   %s, CASE WHEN %s THEN now() + make_interval(secs => %s) END,
                   CASE WHEN %s THEN now() END,
                   CASE WHEN %s THEN now() - make_interval(secs => %s) END)
           RETURNING id""",
        (queue, status, json.dumps(payload if payload is not None else {"n": 1}), last_error, attempts,
         max_attempts, run_in, unique_key, priority, worker_id if running else None, running, lease_in, running,
         final, finished_ago),
    ).fetchone()
    assert row is not None
    return int(row[0])


def status_of(conn: psycopg.Connection, job_id: int) -> str | None:
    """The job's status, or None when the row is gone."""
    row = conn.execute("SELECT status::text FROM jobs WHERE id = %s", (job_id,)).fetchone()
    return None if row is None else str(row[0])
