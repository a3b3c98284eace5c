"""The reaper: running jobs whose lease expired go back to queued, or to dead on their last attempt."""

from __future__ import annotations

import logging

from psycopg_pool import ConnectionPool

from skiplock.core import state_changes
from skiplock.core.features import waiting, worker_rows

log = logging.getLogger("skiplock.reaper")

# Worker rows older than this are forgotten; their jobs were already reaped by lease expiry.
STALE_WORKER_SECONDS = 3600.0


class Reaper:
    """One pass per `run_once()`; the worker's scheduler calls it every SKIPLOCK_REAPER_INTERVAL."""

    def __init__(self, pool: ConnectionPool, batch: int = 1000) -> None:
        self.pool = pool
        self.batch = batch

    def run_once(self) -> list[tuple[int, str, str]]:
        """Reap every expired lease (in batches of `batch`); return (id, queue, new status) rows."""
        reaped: list[tuple[int, str, str]] = []
        with self.pool.connection() as conn:
            while True:
                rows = state_changes.reap_expired(conn, self.batch)
                reaped.extend(rows)
                if len(rows) < self.batch:
                    break
            worker_rows.prune_stale(conn, STALE_WORKER_SECONDS)
            # a crashed worker's waiter rows would make every producer NOTIFY for nobody
            waiting.prune_gone(conn)
        for job_id, queue, status in reaped:
            log.warning("reaped job %s queue=%s: lease expired, now %s", job_id, queue, status)
        return reaped
