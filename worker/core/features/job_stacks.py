"""A running job's stack, on request, in the database (migration 042).

An operator asks (`ask`: the console's "Show stack", `skiplock jobs stack ID`); the worker that holds the
job reads the open requests of the jobs it runs (`asked_of`), takes the stack of the handler's thread or
task (worker/runtime/job_stacks.py) and writes it with the time it was taken (`capture`); the console
and the CLI read it back (`of_job`, `wait`). Read-only for the job: nothing about its run changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from skiplock.core.sql import queries
from skiplock.core.status import JobStatus

Q = queries("job_stacks")


class NotRunning(LookupError):
    """The job does not run now (or does not exist): it has no stack to take."""


def ask(conn: psycopg.Connection, job_id: int, who: str) -> datetime:
    """Ask for a running job's stack (replacing an earlier request); returns when it was asked.
    Raises NotRunning for a job that is not running."""
    with conn.cursor(row_factory=dict_row) as cur:
        state = cur.execute(Q.job_state, {"job_id": job_id}).fetchone()
        if state is None:
            raise NotRunning(f"job {job_id} does not exist")
        if state["status"] != JobStatus.RUNNING:
            raise NotRunning(f"job {job_id} is {state['status']}, not running: it has no stack to show")
        row = cur.execute(Q.ask, {"job_id": job_id, "who": who}).fetchone()
    assert row is not None
    return row["requested_at"]


def asked_of(conn: psycopg.Connection, job_ids: Sequence[int]) -> list[int]:
    """Those of `job_ids` whose stack is asked for and not taken yet."""
    if not job_ids:
        return []
    return [r[0] for r in conn.execute(Q.asked_of, {"job_ids": list(job_ids)})]


def capture(conn: psycopg.Connection, worker_id: str, job_id: int, attempt: int, stack: str) -> None:
    """Answer the open request for `job_id` with the stack taken now."""
    conn.execute(Q.capture, {"worker_id": worker_id, "job_id": job_id, "attempt": attempt, "stack": stack})


def of_job(conn: psycopg.Connection, job_id: int) -> dict[str, Any] | None:
    """The job's latest request, with its stack once taken (captured_at, stack); None: never asked."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(Q.of_job, {"job_id": job_id}).fetchone()


def wait(connect: Callable[[], AbstractContextManager[psycopg.Connection]], job_id: int, timeout: float,
         poll: float = 0.25) -> dict[str, Any] | None:
    """Wait up to `timeout` seconds for the stack asked of `job_id`; the row once captured, else None."""
    deadline = time.monotonic() + timeout
    while True:
        with connect() as conn:
            row = of_job(conn, job_id)
        if row is not None and row["captured_at"] is not None:
            return row
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll)


def prune(conn: psycopg.Connection, keep_seconds: float) -> int:
    """Delete requests older than `keep_seconds`; return how many."""
    return conn.execute(Q.prune, {"retention": keep_seconds}).rowcount
