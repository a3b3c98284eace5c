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
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import ConnectionPool

from skiplock.core.plumbing.db import is_connection_error
from skiplock.services import recurring_store
from skiplock.services.schedule import plan_time

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


def utcnow() -> datetime:
    """The default clock."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class Pending:
    """A definition's pending slot, and when the pass after it should run."""

    name: str
    queue: str
    fire_at: datetime
    plan_at: datetime  # fire_at + the definition's spread offset


class RecurringService:
    """One scheduler pass per `run_once(now)`; `tick()` also arms the timers on a scheduler."""

    def __init__(
        self,
        pool: ConnectionPool,
        definitions: Iterable[Definition] = (),
        owned_queues: Iterable[str] = (),
        *,
        clock: Callable[[], datetime] = utcnow,
        scheduler: BaseScheduler | None = None,
        wake: Callable[[], None] | None = None,
        wake_queues: Iterable[str] = (),
    ) -> None:
        self.pool = pool
        self.definitions = list(definitions)
        self.owned_queues = set(owned_queues) | {d.queue for d in self.definitions}
        self.clock = clock
        self.scheduler = scheduler
        self.wake = wake
        self.wake_queues = set(wake_queues)
        self.synced = False
        self.pending: list[Pending] = []
        self._armed: dict[str, datetime] = {}
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

        A definition is due when nothing is pending, or its pending slot fired at least its
        spread offset ago. Until the sync has succeeded once, nothing is planned.
        """
        with self._lock:
            if not self.synced:
                self.sync()
            now = now or self.clock()
            enqueued: list[tuple[str, datetime]] = []
            pending: list[Pending] = []
            with self.pool.connection() as conn:
                for row in recurring_store.live_schedules(conn):
                    try:
                        self._plan_one(conn, row, now, enqueued, pending)
                    except Exception as exc:
                        if is_connection_error(exc):
                            raise
                        # one broken row (edited by hand, say) must not stop every other definition
                        log.exception("recurring %s: planning failed; other definitions go on", row["name"])
            self.pending = pending
            return enqueued

    def _plan_one(self, conn: psycopg.Connection, row: dict[str, Any], now: datetime,
                  enqueued: list[tuple[str, datetime]], pending: list[Pending]) -> None:
        head = row["next_fire_at"]
        if head is None or now >= self._plan_at(row, head):
            advanced = recurring_store.advance(conn, row["name"], now)
            if advanced is None:
                return  # another worker is planning it right now (or it was just paused)
            enqueued.extend((row["name"], t) for t in advanced.enqueued)
            head = advanced.next_fire_at
        if head is not None:
            pending.append(Pending(row["name"], row["queue"], head, self._plan_at(row, head)))

    @staticmethod
    def _plan_at(row: dict[str, Any], head: datetime) -> datetime:
        return plan_time(row["name"], row["kind"], row["schedule"], row["timezone"], head)

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
        now = self.clock()
        for item in self.pending:
            if self.wake is not None and item.queue in self.wake_queues and item.fire_at > now \
                    and self._armed.get(item.name) != item.fire_at:
                scheduler.add_job(self.wake, "date", run_date=item.fire_at + WAKE_DELAY,
                                  id=f"recurring-wake:{item.name}", replace_existing=True)
                self._armed[item.name] = item.fire_at
        soonest = min((p.plan_at for p in self.pending), default=None)
        if soonest is not None and now < soonest < now + timedelta(seconds=POLL_SECONDS) \
                and self._armed.get("") != soonest:
            # the poll would be up to a second late for the next slot's enqueue: run a pass on time
            scheduler.add_job(self._timed_tick, "date", run_date=soonest, id="recurring-on-time",
                              replace_existing=True)
            self._armed[""] = soonest

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

