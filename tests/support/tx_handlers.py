"""Handlers that finish their job in their own transaction (job.complete), for
tests/integration/test_user_transaction.py.

Workers load them with SKIPLOCK_TASKS=tests.support.handlers,tests.support.tx_handlers. Tables (made by the tests):
  tx_results(job_id, attempt, pid)  the handler's business write, committed with the completion
  tx_lost(job_id, attempt)          written outside that transaction when complete() refused
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import psycopg

from skiplock import JobOwnershipLost, task
from skiplock.core.job_context import JobContext
from tests.support.helpers import thread_connection

_local = threading.local()


def _conn() -> psycopg.Connection:
    return thread_connection(_local, "skiplock-test-tx")


def write_and_complete(job: JobContext, pause: float) -> None:
    """The business row and the job's completion in one transaction, with a pause between them
    (server-side, so a SIGKILL of the worker lands inside the transaction as often as outside)."""
    conn = _conn()
    with conn.transaction():
        conn.execute("INSERT INTO tx_results (job_id, attempt, pid) VALUES (%s, %s, %s)",
                     (job.id, job.attempt, os.getpid()))
        if pause:
            conn.execute("SELECT pg_sleep(%s)", (pause,))
        job.complete(conn)


@task("tx_once")
def exactly_once(payload: Any, job: JobContext) -> None:
    write_and_complete(job, float(payload.get("pause", 0)))


@task("tx_slow", lease=1.0)
def loses_its_lease(payload: Any, job: JobContext) -> None:
    """Attempt 1 waits (no heartbeat in its worker) until another worker has taken the job, then
    tries to complete it: that must fail and its row must not commit. Later attempts complete."""
    if job.attempt == 1:
        deadline = time.monotonic() + 60
        while True:
            row = _conn().execute("SELECT attempts FROM jobs WHERE id = %s", (job.id,)).fetchone()
            if row is None or row[0] >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)  # polling the database for the other worker's claim, not a sync sleep in a test
        try:
            write_and_complete(job, 0)
        except JobOwnershipLost:
            _conn().execute("INSERT INTO tx_lost (job_id, attempt) VALUES (%s, %s)", (job.id, job.attempt))
            raise
        return
    write_and_complete(job, 0)
