"""The workflow sweeper: the worker's maintenance service that repairs what the normal path left undone.

Finding and repairing are core.workflows.workflow_repair's (the doctor uses the same finders); this service only
runs a pass on a timer and logs what it repaired.
"""

from __future__ import annotations

import logging

from psycopg_pool import ConnectionPool

from skiplock.core.workflows.workflow_repair import GRACE_SECONDS, Sweep, repair

log = logging.getLogger("skiplock.sweeper")


class WorkflowSweeper:
    """The worker's maintenance service; the scheduler calls `run_once` every SKIPLOCK_SWEEP_INTERVAL."""

    def __init__(self, pool: ConnectionPool, grace: float = GRACE_SECONDS) -> None:
        self.pool = pool
        self.grace = grace

    def run_once(self) -> Sweep:
        with self.pool.connection() as conn:
            sweep = repair(conn, self.grace)
        if sweep.found:
            log.warning("workflow sweeper repaired what the normal path missed: parents settled late %s, "
                        "waiting jobs recounted %s, batches recounted %s, batches called back %s",
                        sweep.stranded_parents, sweep.recounted_jobs, sweep.recounted_batches, sweep.called_back)
        return sweep
