"""Snoozed runs (`raise Snooze(seconds)`): back to queued later, the claim's attempt given back.

Written by core.ack_batch in a statement of its own, fenced like every ack (this worker, this run,
still running), so a late result of a reaped run never touches the newer run.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from skiplock.core.records import Outcome
from skiplock.core.statements import _own_rows

SNOOZE_BATCH = f"""
UPDATE jobs j
   SET status = 'queued',
       run_at = now() + make_interval(secs => v.delay),
       attempts = greatest(j.attempts - 1, 0),
       snooze_count = coalesce(j.snooze_count, 0) + 1,
       worker_id = NULL,
       lease_until = NULL
  FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(delays)s::float8[]) AS v(id, attempt, delay)
       {_own_rows(with_attempt=True)}
 WHERE j.ctid = f.ctid
RETURNING j.id
"""


def snooze_batch(conn: psycopg.Connection, worker_id: str, outcomes: Sequence[Outcome]) -> set[int]:
    """Requeue snoozed runs; return the ids written (a missing id lost its lease, as in ack_batch)."""
    rows = conn.execute(SNOOZE_BATCH, {"worker_id": worker_id, "ids": [o.job_id for o in outcomes],
                                       "attempts": [o.attempt for o in outcomes],
                                       "delays": [float(o.delay) for o in outcomes]}).fetchall()
    return {row[0] for row in rows}
