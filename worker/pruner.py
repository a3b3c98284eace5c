"""The pruner: finished jobs past their retention are deleted, a bounded batch per statement."""

from __future__ import annotations

import logging

import psycopg
from psycopg_pool import ConnectionPool

from skiplock import audit, core
from skiplock.config import Settings
from skiplock.status import JobStatus

log = logging.getLogger("skiplock.pruner")


class Pruner:
    """One pass per `run_once()`; the worker's scheduler calls it every minute."""

    def __init__(self, pool: ConnectionPool, settings: Settings, batch: int = 1000,
                 max_batches: int = 100) -> None:
        self.pool = pool
        self.settings = settings
        self.batch = batch
        # A pass stops after this many statements per status, so a huge backlog is worked off over several
        # passes instead of one that keeps a connection and the scheduler thread for minutes.
        self.max_batches = max_batches

    def retention(self) -> list[tuple[JobStatus, float]]:
        """(status, seconds kept after finishing) for every status the pruner deletes."""
        history = self.settings.history_retention
        return [(JobStatus.SUCCEEDED, history), (JobStatus.FAILED, history),
                (JobStatus.DEAD, self.settings.dead_retention)]

    def run_once(self) -> int:
        """Delete succeeded/failed/dead jobs, audit rows and stats minutes past their retention; return how many."""
        total = 0
        with self.pool.connection() as conn:
            for status, keep in self.retention():
                for _ in range(self.max_batches):
                    deleted = core.prune_finished(conn, status, keep, self.batch)
                    total += deleted
                    if deleted < self.batch:
                        break
            total += self._prune_audit(conn)
            total += self._prune_stats(conn)
        if total:
            log.info("pruned %d finished job(s) and audit row(s) past retention", total)
        return total

    def _prune_stats(self, conn: psycopg.Connection) -> int:
        """Per-minute stats older than SKIPLOCK_STATS_RETENTION are folded into per-queue totals."""
        total = 0
        for _ in range(self.max_batches):
            deleted = core.prune_stats(conn, self.settings.stats_retention, self.batch)
            total += deleted
            if deleted < self.batch:
                break
        return total

    def _prune_audit(self, conn: psycopg.Connection) -> int:
        """The operator audit trail is kept for SKIPLOCK_AUDIT_RETENTION, in the same bounded batches."""
        total = 0
        for _ in range(self.max_batches):
            deleted = audit.prune(conn, self.settings.audit_retention, self.batch)
            total += deleted
            if deleted < self.batch:
                break
        return total
