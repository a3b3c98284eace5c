"""Every failed attempt's error, kept on the job (jobs.attempt_errors, migration 012).

A bounded JSON array, newest last: the last KEEP_ATTEMPTS failed runs, each {attempt, worker, started,
at, duration_ms, error} with the error cut to ERROR_CHARS. `started` is the run's claim (jobs.started_at,
still this run's while its failure is written; entries written before issue 36 lack it), `at` the ack.
last_error stays as it is for SQL users.
state_changes.ack_batch writes it just before a batch's failures, with the same fence as the ack (this
worker, this run, still running), so a late result of a reaped run never adds a line. Runs whose
lease expired (a crash) are not listed here: the reaper's text in last_error says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from skiplock.core import statements
from skiplock.core.records import Outcome

KEEP_ATTEMPTS = 20
ERROR_CHARS = 2000


def record(conn: psycopg.Connection, worker_id: str, failures: Sequence[Outcome]) -> None:
    """Append each failed run's error to its job's bounded history (fenced; see the module doc)."""
    if not failures:
        return
    conn.execute(statements.RECORD_ATTEMPTS, {
        "keep": KEEP_ATTEMPTS, "chars": ERROR_CHARS, "worker_id": worker_id,
        "ids": [o.job_id for o in failures], "attempts": [o.attempt for o in failures],
        "durations": [o.duration_ms for o in failures], "errors": [o.error for o in failures]})
