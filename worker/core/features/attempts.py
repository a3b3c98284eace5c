"""Every failed attempt's error, kept on the job (jobs.attempt_errors, migration 012).

A bounded JSON array, newest last: the last KEEP_ATTEMPTS failed runs, each {attempt, worker, at,
duration_ms, error} with the error cut to ERROR_CHARS. last_error stays as it is for SQL users.
core.ack_batch writes it just before a batch's failures, with the same fence as the ack (this
worker, this run, still running), so a late result of a reaped run never adds a line. Runs whose
lease expired (a crash) are not listed here: the reaper's text in last_error says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from skiplock.core.records import Outcome
from skiplock.core.statements import _own_rows

KEEP_ATTEMPTS = 20
ERROR_CHARS = 2000

RECORD_ATTEMPTS = f"""
UPDATE jobs j
   SET attempt_errors = (
       SELECT jsonb_agg(e.value ORDER BY e.n)
         FROM jsonb_array_elements(
                  coalesce(j.attempt_errors, '[]'::jsonb)
                  || jsonb_build_array(jsonb_build_object(
                         'attempt', v.attempt, 'worker', %(worker_id)s::text, 'at', now(),
                         'duration_ms', round(v.duration::numeric, 1), 'error', left(v.error, {ERROR_CHARS}))))
              WITH ORDINALITY AS e(value, n)
        WHERE e.n > jsonb_array_length(coalesce(j.attempt_errors, '[]'::jsonb)) + 1 - {KEEP_ATTEMPTS})
  FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(durations)s::float8[], %(errors)s::text[])
       AS v(id, attempt, duration, error)
       {_own_rows(with_attempt=True)}
 WHERE j.ctid = f.ctid
"""


def record(conn: psycopg.Connection, worker_id: str, failures: Sequence[Outcome]) -> None:
    """Append each failed run's error to its job's bounded history (fenced; see the module doc)."""
    if not failures:
        return
    conn.execute(RECORD_ATTEMPTS, {
        "worker_id": worker_id, "ids": [o.job_id for o in failures], "attempts": [o.attempt for o in failures],
        "durations": [o.duration_ms for o in failures], "errors": [o.error for o in failures]})
