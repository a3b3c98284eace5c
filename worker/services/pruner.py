"""The pruner: finished jobs past their retention are deleted, a bounded batch per statement."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from psycopg_pool import ConnectionPool

from skiplock.core import state_changes, unique_for
from skiplock.core.durable import service as durable_service
from skiplock.core.features import audit, job_logs, job_stacks, payload_edit, run_times, stats_rollup
from skiplock.core.plumbing.config import Settings
from skiplock.core.sql import queries
from skiplock.core.status import JobStatus
from skiplock.core.workflows import results

ALERTS = queries("alerts")

log = logging.getLogger("skiplock.pruner")

# A wait() registration older than this belongs to a process that died while waiting (wait() itself
# deletes its row when it returns); a day is far past any sensible wait.
WATCHER_SECONDS = 86400.0


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
                total += self._in_batches(partial(state_changes.prune_finished, conn, status, keep))
            # the operator audit trail is kept for SKIPLOCK_AUDIT_RETENTION
            total += self._in_batches(lambda n: audit.prune(conn, self.settings.audit_retention, n))
            # payload edits (migration 032) are the audit's evidence: kept as long
            total += self._in_batches(lambda n: payload_edit.prune(conn, self.settings.audit_retention, n))
            # the alerts sent (worker/services/alerts.py) are the on-call's record, kept as long as the audit
            total += conn.execute(ALERTS.prune_sent, {"retention": self.settings.audit_retention}).rowcount
            # closed hours of per-minute stats summed for the console's 7-day charts (migration 033),
            # before the minutes past retention go; sums of rows counted below, so not counted again
            stats_rollup.roll_up(conn)
            self._in_batches(lambda n: stats_rollup.prune(conn, self.settings.stats_retention, n))
            # per-minute stats past SKIPLOCK_STATS_RETENTION fold into per-queue totals
            total += self._in_batches(lambda n: state_changes.prune_stats(conn, self.settings.stats_retention, n))
            # stored results past SKIPLOCK_RESULT_TTL, and wait() registrations of processes that died
            total += self._in_batches(lambda n: state_changes.prune_results(conn, self.settings.result_ttl, n))
            results.prune_watchers(conn, WATCHER_SECONDS)
            # per-minute run times (migration 028) are kept as long as the stats they sit beside
            total += self._in_batches(lambda n: run_times.prune(conn, self.settings.stats_retention, n))
            # durable jobs' steps, cursors and wait rows of jobs that are gone, and signals past
            # SKIPLOCK_SIGNAL_RETENTION (core/durable/service.py)
            total += self._in_batches(lambda n: durable_service.prune(conn, self.settings.signal_retention, n))
            # unique_for keys past their window (migration 037), through the expiry index
            total += self._in_batches(lambda n: unique_for.prune(conn, n))
            # the jobs' own log lines (migration 041) are kept as long as the longest-kept finished job
            logs_kept = max(self.settings.history_retention, self.settings.dead_retention)
            total += self._in_batches(lambda n: job_logs.prune(conn, logs_kept, n))
            # stack requests (migration 042) are audited actions: their stacks are kept as long as the audit
            total += job_stacks.prune(conn, self.settings.audit_retention)
        if total:
            log.info("pruned %d finished job(s), audit and stats row(s) past retention", total)
        return total

    def _in_batches(self, prune_batch: Callable[[int], int]) -> int:
        """Call `prune_batch(self.batch)` until a batch comes back short, at most max_batches times."""
        total = 0
        for _ in range(self.max_batches):
            deleted = prune_batch(self.batch)
            total += deleted
            if deleted < self.batch:
                break
        return total
