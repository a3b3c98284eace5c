"""The "enqueue next run" scheduler that every worker process runs (the Worker wires it).

Each definition always has its next slot enqueued as a future job (run_at = fire time). When
that slot fires, the worker's claim loop is woken by a timer and runs it like any other job;
a moment later (the definition's spread offset) a pass enqueues the slot after it. Any number
of workers run this; recurring_store.advance makes sure each slot is enqueued once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import psycopg
from psycopg_pool import ConnectionPool

from skiplock.core.plumbing.db import is_connection_error
from skiplock.services import recurring_store

if TYPE_CHECKING:
    from apscheduler.schedulers.base import BaseScheduler

    from skiplock.services.recurring_defs import Definition

log = logging.getLogger("skiplock.recurring")

# Safety-net pass: picks up pause/resume/run-now and other workers' progress. Exact fire times
# do not depend on it: timers are armed for each pending slot (and the pass after it).
POLL_SECONDS = 1.0
# Pruner and slot cleanup cadence (both wired by the Worker).
PRUNE_SECONDS = 60.0
# Slot rows are kept at least this long (see recurring_store.PRUNE_SLOTS for why it is safe).
SLOT_RETENTION = timedelta(days=2)
# Wake a little after the fire time: the claim compares run_at with the database's clock.
WAKE_DELAY = timedelta(milliseconds=20)
# Definitions planned per pass at most: a pass stays short (its connection and the scheduler thread are
# free again soon) when thousands fall due together; the rest are planned by the next pass, in time, as each
# pending slot is already enqueued and the one after it is due a whole period later.
PASS_LIMIT = 500
# Definitions planned per transaction: each write of a batch is one set-based statement, so a batch costs
# about what its round trips cost whatever its size; small enough that it holds its row locks only briefly.
BATCH = 500


def utcnow() -> datetime:
    """The default clock."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class WakeTimers:
    """Where `tick()` arms its timers: the scheduler, and the claim loop's wake for the soonest slot of
    `wake_queues` (the queues this worker claims)."""

    scheduler: BaseScheduler
    wake: Callable[[], None] | None = None
    wake_queues: Iterable[str] = ()


class RecurringService:
    """One scheduler pass per `run_once(now)`; `tick()` also arms the timers on a scheduler."""

    def __init__(
        self,
        pool: ConnectionPool,
        definitions: Iterable[Definition] = (),
        owned_queues: Iterable[str] = (),
        *,
        clock: Callable[[], datetime] = utcnow,
        timers: WakeTimers | None = None,
    ) -> None:
        self.pool = pool
        self.definitions = list(definitions)
        self.owned_queues = set(owned_queues) | {d.queue for d in self.definitions}
        self.clock = clock
        self.scheduler = timers.scheduler if timers else None
        self.wake = timers.wake if timers else None
        self.wake_queues = set(timers.wake_queues) if timers else set()
        self.synced = False
        self._armed: dict[str, datetime] = {}  # timer -> the moment it is armed for
        self._warned_unmigrated = False
        self._lock = threading.RLock()  # tick() holds it around run_once()

    def sync(self) -> recurring_store.SyncResult:
        """Write this process's definitions to the table (once per process, before planning)."""
        with self.pool.connection() as conn:
            result = recurring_store.sync_definitions(conn, self.definitions, self.owned_queues)
        self.synced = True
        return result

    def run_once(self, now: datetime | None = None) -> list[tuple[str, datetime]]:
        """Enqueue every due slot at `now` (default: the clock); return the (name, fire_at) enqueued.

        A definition is due when nothing is pending, or its pending slot fired at least its spread
        offset ago (its plan_at). The table says which ones are due, PASS_LIMIT at a time, so a pass
        costs what the due definitions cost however many there are, and this process keeps nothing
        per definition. Until the sync has succeeded once, nothing is planned.
        """
        with self._lock:
            if not self.synced:
                self.sync()
            now = now or self.clock()
            enqueued: list[tuple[str, datetime]] = []
            with self.pool.connection() as conn:
                due = [row["name"] for row in recurring_store.due_schedules(conn, now, PASS_LIMIT)]
                for start in range(0, len(due), BATCH):
                    self._plan_batch(conn, due[start:start + BATCH], now, enqueued)
            return enqueued

    def _plan_batch(self, conn: psycopg.Connection, names: list[str], now: datetime,
                    enqueued: list[tuple[str, datetime]]) -> None:
        try:
            planned = recurring_store.advance_many(conn, names, now)
        except Exception as exc:
            if is_connection_error(exc):
                raise
            # one broken row (edited by hand, say) must not stop every other definition: one at a time
            planned = {}
            for name in names:
                try:
                    advanced = recurring_store.advance(conn, name, now)
                except Exception as exc_one:
                    if is_connection_error(exc_one):
                        raise
                    log.exception("recurring %s: planning failed; other definitions go on", name)
                    continue
                if advanced is not None:  # None: another worker is planning it (or it was just paused)
                    planned[name] = advanced
        for name, advanced in planned.items():
            enqueued.extend((name, t) for t in advanced.enqueued)

    def tick(self) -> None:
        """A pass, then timers: wake the claim loop at each pending fire time, and plan right after it."""
        with self._lock:
            try:
                self.run_once()
            except psycopg.errors.UndefinedTable:
                self._warn_unmigrated()
                return
            if self.scheduler is not None:
                self._arm_timers(self.scheduler)

    def _warn_unmigrated(self) -> None:
        # a database migrated by an older release: say how to fix it once, not a traceback a second
        if not self._warned_unmigrated:
            log.error("recurring jobs are off: table recurring_schedules is missing; run `skiplock migrate`")
            self._warned_unmigrated = True

    def _arm_timers(self, scheduler: BaseScheduler) -> None:
        # Two timers at most, whatever the number of definitions: each pass re-arms them for the soonest
        # moments, and passes come every POLL_SECONDS, so a later slot gets its timer in time.
        now = self.clock()
        with self.pool.connection() as conn:
            fire = recurring_store.soonest_fire(conn, now, self.wake_queues) if self.wake_queues else None
            soonest = recurring_store.soonest_plan(conn, now)
        if self.wake is not None and fire is not None and self._armed.get("wake") != fire:
            scheduler.add_job(self.wake, "date", run_date=fire + WAKE_DELAY, id="recurring-wake",
                              replace_existing=True)
            self._armed["wake"] = fire
        if soonest is not None and soonest < now + timedelta(seconds=POLL_SECONDS) \
                and self._armed.get("plan") != soonest:
            # the poll would be up to a second late for the next slot's enqueue: run a pass on time
            scheduler.add_job(self._timed_tick, "date", run_date=soonest, id="recurring-on-time",
                              replace_existing=True)
            self._armed["plan"] = soonest

    def _timed_tick(self) -> None:
        try:
            self.tick()
        except Exception as exc:
            if is_connection_error(exc):
                log.warning("recurring pass skipped: database unavailable (%s)", str(exc).strip()[:200])
            else:
                log.exception("recurring pass failed")

    def prune_slots(self) -> int:
        """Delete old slot rows in batches; return how many."""
        total = 0
        try:
            with self.pool.connection() as conn:
                while (deleted := recurring_store.prune_slots(conn, SLOT_RETENTION)) > 0:
                    total += deleted
        except psycopg.errors.UndefinedTable:
            self._warn_unmigrated()
        return total

