"""What the workflow sweeper and the doctor look for: what the normal path left undone, and its repair.

The normal path settles dependents and batches inside the finalising statement itself (migration
026's skiplock_settle), so a crash cannot split a transition from its consequences. What it cannot
see is a job finished by something that does not call that function: a hand-written SQL UPDATE or
DELETE, an older client, a restore. Each pass (`run_once`) looks for, and repairs:
- waiting jobs whose open edges point at parents that are final or gone: those parents are settled;
- waiting jobs whose counter disagrees with their open edges: recounted (and released at zero);
- batches whose pending counter disagrees with their members' rows: recounted (and called back);
- sealed batches with nothing pending and no callback: called back (exactly once, the same guard).
`skiplock doctor` runs the same finders without repairing (monitor/doctor.py); the worker's
maintenance service (services/workflow_sweeper.py) runs `repair` on a timer. Only jobs older than
`grace` seconds are looked at, so a transaction that is still linking them is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg

from skiplock.core import state_changes
from skiplock.core.sql import queries

REPAIR_SQL = queries("workflow_repair")

GRACE_SECONDS = 10.0  # younger waiting jobs / batches are left to the transaction that is making them
BATCH = 1000  # rows a finder returns per pass


@dataclass
class Sweep:
    """What one pass found (and, unless only looking, repaired)."""

    stranded_parents: list[int] = field(default_factory=list)  # parents settled late
    recounted_jobs: list[int] = field(default_factory=list)
    recounted_batches: list[int] = field(default_factory=list)
    called_back: list[int] = field(default_factory=list)  # batches called back by the sweeper

    @property
    def found(self) -> int:
        return (len(self.stranded_parents) + len(self.recounted_jobs) + len(self.recounted_batches)
                + len(self.called_back))


def find(conn: psycopg.Connection, grace: float = GRACE_SECONDS) -> Sweep:
    """What a pass would repair, without repairing it (the doctor's check)."""
    sweep = Sweep()
    sweep.stranded_parents = sorted({r[0] for r in conn.execute(
        REPAIR_SQL.stranded_edges, {"grace": grace, "limit": BATCH})})
    sweep.recounted_jobs = [r[0] for r in conn.execute(
        REPAIR_SQL.miscounted_waiting, {"grace": grace, "limit": BATCH})]
    sweep.recounted_batches = [r[0] for r in conn.execute(
        REPAIR_SQL.miscounted_batches, {"grace": grace, "limit": BATCH})]
    sweep.called_back = [r[0] for r in conn.execute(REPAIR_SQL.uncalled_batches, {"limit": BATCH})]
    return sweep


def repair(conn: psycopg.Connection, grace: float = GRACE_SECONDS) -> Sweep:
    """One pass: find and repair, each repair in its own short transaction."""
    sweep = Sweep()
    stranded = conn.execute(REPAIR_SQL.stranded_edges, {"grace": grace, "limit": BATCH}).fetchall()
    parents: dict[int, tuple[str, str | None]] = {r[0]: (r[1], r[2]) for r in stranded}
    if parents:
        ids = sorted(parents)
        with conn.transaction():
            state_changes.settle_parents(conn, ids, [parents[i][0] for i in ids], [parents[i][1] for i in ids])
        sweep.stranded_parents = ids
    miscounted = [r[0] for r in conn.execute(REPAIR_SQL.miscounted_waiting, {"grace": grace, "limit": BATCH})]
    if miscounted:
        with conn.transaction():  # the released jobs' queues are woken in it
            fixed = state_changes.recount_waiting(conn, miscounted)
        sweep.recounted_jobs = [r[0] for r in fixed]
    miscounted_batches = conn.execute(REPAIR_SQL.miscounted_batches, {"grace": grace, "limit": BATCH}).fetchall()
    for batch_id, *_counts in miscounted_batches:
        with conn.transaction():
            state_changes.recount_batch(conn, batch_id)
        sweep.recounted_batches.append(batch_id)
    for (batch_id,) in conn.execute(REPAIR_SQL.uncalled_batches, {"limit": BATCH}).fetchall():
        with conn.transaction():
            called_back = state_changes.call_back_batch(conn, batch_id)
        if called_back:
            sweep.called_back.append(batch_id)
    return sweep
