"""The acker: finished jobs' outcomes written in batches, each batch one fenced statement.

Handler threads `put` each outcome. A pass (`run_once`) gathers for up to one ack interval, or
less once a whole batch is waiting, then writes the batch with state_changes.ack_batch, fenced on this
worker and run. On a lost connection it keeps the batch and the next pass writes it again, so
finished work is never forgotten; a result whose lease was lost meanwhile is dropped and counted
as stale. The worker runs `run()` on a thread of its own; tests call `run_once()`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from skiplock.core import state_changes
from skiplock.core.plumbing.db import describe_db_error, is_connection_error
from skiplock.core.status import OutcomeStatus
from skiplock.runtime.parts import WorkerParts
from skiplock.runtime.row_writer import RowWriter

log = logging.getLogger("skiplock.worker")

# Each outcome's counter (the Worker's Counters' field names).
COUNTER: dict[str, str] = {OutcomeStatus.OK: "succeeded", OutcomeStatus.RETRY: "retried", OutcomeStatus.DEAD: "dead",
                           OutcomeStatus.FAILED: "failed", OutcomeStatus.SNOOZED: "snoozed"}


class Acker(RowWriter):
    """Gathers outcomes and writes each batch with one fenced statement."""

    def __init__(self, parts: WorkerParts,
                 on_written: Callable[[list[state_changes.Outcome], bool], None] | None = None) -> None:
        super().__init__(parts)  # the row writers' connection, lock, ledger and counters
        self.latency = parts.latency
        self.batch = parts.settings.ack_batch
        self.interval = parts.settings.ack_interval
        self.history = parts.settings.history
        # told of each written batch, and whether it ended a lock-keyed job (the worker: limited queues'
        # slots are free, a key's next job may be claimable)
        self.on_written = on_written
        self._outcomes: queue.SimpleQueue[state_changes.Outcome] = queue.SimpleQueue()
        self._full = threading.Event()  # a whole batch is waiting: write before the interval ends
        self._holding = 0  # outcomes a pass has taken and is gathering a batch around
        self._pending: list[state_changes.Outcome] = []  # taken, not yet written (kept while the database is away)

    def put(self, outcome: state_changes.Outcome) -> None:
        """A finished run's outcome, to be written with the next batch."""
        self._outcomes.put(outcome)
        self.check_full()

    def check_full(self) -> None:
        """Wake the pass now when a whole batch is waiting."""
        if self._outcomes.qsize() + self._holding >= self.batch and not self._full.is_set():
            self._full.set()

    def write_now(self) -> None:
        """Write what is gathered without waiting out the interval (shutdown: it may be long)."""
        self._full.set()

    def waiting(self) -> bool:
        """Outcomes not yet taken by a pass."""
        return not self._outcomes.empty()

    def run_once(self, first_wait: float = 0.2) -> bool | None:
        """One pass. None: no outcome came within `first_wait` seconds; True: a batch was written;
        False: the database was unavailable and the batch is kept for the next pass."""
        pending = self._pending
        if not pending:
            try:
                pending.append(self._outcomes.get(timeout=first_wait))
            except queue.Empty:
                return None
        # Gather for one ack interval, then take what has arrived. Waiting on the queue itself
        # would wake this thread once per finished job (a futex wake and a GIL hand-off per
        # job); put() sets _full instead once a whole batch is waiting, counting the outcomes
        # held here. Between taking them and publishing the count, put() may see too few, never
        # too many, so the check below covers that moment.
        self._holding = len(pending)
        if len(pending) + self._outcomes.qsize() < self.batch:
            self._full.wait(self.interval)
        self._full.clear()
        while len(pending) < self.batch:
            try:
                pending.append(self._outcomes.get_nowait())
            except queue.Empty:
                break
        self._holding = 0  # being written now, no longer waiting for a batch
        if not self._flush(pending):
            return False
        self._pending = []
        return True

    def run(self, done: threading.Event) -> None:
        """The acker thread: passes until `done` is set and nothing is left to write."""
        backoff = 0.05
        while True:
            written = self.run_once()
            if written is None:
                if done.is_set():
                    return
            elif written:
                backoff = 0.05
            else:
                # keep every outcome; retry with backoff until the database is back
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    def _flush(self, outcomes: list[state_changes.Outcome]) -> bool:
        try:
            started = time.perf_counter()
            with self._row_writes, self._connect() as conn:
                written, keys_freed = state_changes.ack_batch_with_keys(conn, self.worker_id, outcomes,
                                                                        history=self.history)
                # the finished runs' log lines, in the ack's transaction (worker/runtime/job_logs.py)
                self.job_logs.flush(conn, self.worker_id)
                # forget the ids before a heartbeat can run: it would otherwise find the rows gone
                # and report leases lost for jobs that were just acked
                self.ledger.acked([outcome.job_id for outcome in outcomes])
            self.latency.observe("ack", time.perf_counter() - started)
        except Exception as exc:
            if not is_connection_error(exc):
                log.exception("ack batch failed; will retry")
            else:
                log.warning("ack failed, database unavailable (%s); keeping %d results",
                            describe_db_error(exc), len(outcomes))
            self.counters.ack_errors += 1
            return False
        for outcome in outcomes:
            if outcome.job_id not in written:
                self.counters.stale_acks += 1
                log.warning("job %d: lease lost before ack, result dropped (a newer run owns the job now)",
                            outcome.job_id, extra={"job_id": outcome.job_id, "outcome": "stale"})
            else:
                setattr(self.counters, COUNTER[outcome.status], getattr(self.counters, COUNTER[outcome.status]) + 1)
        if self.on_written is not None:
            self.on_written(outcomes, keys_freed)
        return True
