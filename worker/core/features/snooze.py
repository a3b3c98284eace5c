"""Snoozed runs (`raise Snooze(seconds)`): back to queued later, the claim's attempt given back.

Written by state_changes.ack_batch in a statement of its own, fenced like every ack (this worker, this run,
still running), so a late result of a reaped run never touches the newer run.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from skiplock.core import statements
from skiplock.core.records import Outcome


def snooze_batch(conn: psycopg.Connection, worker_id: str, outcomes: Sequence[Outcome]) -> set[int]:
    """Requeue snoozed runs; return the ids written (a missing id lost its lease, as in ack_batch)."""
    rows = conn.execute(statements.SNOOZE_BATCH, {"worker_id": worker_id, "ids": [o.job_id for o in outcomes],
                                                  "attempts": [o.attempt for o in outcomes],
                                                  "delays": [float(o.delay) for o in outcomes]}).fetchall()
    return {row[0] for row in rows}
