"""The wake pass: parked durable jobs whose time has come go back to their queues, about once a second;
and the parked jobs' sweeper, which wakes what only a bug could have left parked.

Any worker runs it (FOR UPDATE SKIP LOCKED: two passes never wake one job twice). One statement walks
jobs_parked_idx in run_at order and stops at the first job not due, so the pass costs nothing when no
sleep ends, whatever the number of parked jobs; the workers of the woken queues are notified in the same
transaction. The scheduler calls `run_once` every WAKE_SECONDS; tests call it directly.
"""

from __future__ import annotations

import logging

from psycopg_pool import ConnectionPool

from skiplock.core.durable import service

log = logging.getLogger("skiplock.durable")

WAKE_SECONDS = 1.0  # how late a sleep may end at most, beyond the pickup: "within about a second"
WAKE_BATCH = 1000  # jobs per statement; a pass repeats while a batch comes back full


class DurableWaker:
    """The worker's maintenance service that wakes parked jobs at their time (sleeps, wait timeouts)."""

    def __init__(self, pool: ConnectionPool, batch: int = WAKE_BATCH) -> None:
        self.pool = pool
        self.batch = batch

    def run_once(self) -> int:
        """Wake every parked job that is due; how many woke."""
        total = 0
        with self.pool.connection() as conn:
            while True:
                woken = sum(service.wake_due(conn, self.batch).values())
                total += woken
                if woken < self.batch:
                    break
        if total:
            log.debug("woke %d parked job(s)", total)
        return total


class ParkedSweeper:
    """Repairs parked jobs that nothing would wake (docs/explanation/durable-jobs.md, "Repair"): one parked
    on a key that already has a signal, one with no wait row. The scheduler calls `run_once` every
    SKIPLOCK_SWEEP_INTERVAL, beside the workflow sweeper."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool

    def run_once(self) -> service.ParkedRepair:
        with self.pool.connection() as conn:
            repaired = service.repair(conn)
        if repaired.found:
            log.warning("parked-job sweeper woke jobs nothing would have woken: signalled before they parked %s, "
                        "with no wait row %s", repaired.signalled, repaired.unwaited)
        return repaired
