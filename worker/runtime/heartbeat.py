"""The heartbeat: the leases of the jobs a worker holds are extended, and cancel requests read.

Each pass (`run_once`) extends, in one fenced statement (state_changes.heartbeat), the lease of every job
the worker holds: handlers still running and finished jobs whose outcome is not written yet. The
handlers' progress and saved cursors are written with it, and between passes about once a second. In
the same transaction it reads the operators' cancel requests for the running ones (cancel.refresh),
and cancels the asyncio task of an async handler asked to stop. A job whose lease is no longer this
worker's (reaped or released) is reported lost: its result will be dropped by the fenced ack.
The worker runs `run()` on a thread of its own; tests call `run_once()`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from skiplock.core import state_changes
from skiplock.core.durable import cursors
from skiplock.core.features import cancel, progress
from skiplock.core.plumbing.db import describe_db_error, is_connection_error
from skiplock.runtime.async_pool import AsyncHandlerLoop
from skiplock.runtime.parts import WorkerParts
from skiplock.runtime.row_writer import RowWriter

log = logging.getLogger("skiplock.worker")
# How often reported progress and saved cursors reach the database at most: the console refreshes every
# 2 s, and a SIGKILL loses the cursors saved since the last write (docs/howto/durable-jobs.md says so).
PROGRESS_SECONDS = 1.0


class Heartbeat(RowWriter):
    """Extends the leases of held jobs; reads cancel requests for running ones."""

    def __init__(self, parts: WorkerParts, lease_for: Callable[[str], float],
                 async_loop: AsyncHandlerLoop | None = None) -> None:
        super().__init__(parts)  # the row writers' connection, lock, ledger and counters
        self.stacks = parts.stacks
        self.lease_for = lease_for  # a queue's lease in seconds
        self.async_loop = async_loop

    def run_once(self) -> set[int]:
        """Extend the leases of running and unacked jobs; return the ids whose lease was lost."""
        held, running = self.ledger.leases()  # running: the handlers a cancel can still reach
        if not held:
            return set()
        ids = list(held)
        leases = [self.lease_for(held[i]) for i in ids]
        try:
            with self._row_writes, self._connect() as conn:
                kept = state_changes.heartbeat(conn, self.worker_id, ids, leases)
                cancel.refresh(conn,
                               [i for i in running if i in kept])  # job.cancel_requested (core/features/cancel.py)
                state_changes.write_progress(conn, self.worker_id,
                                             progress.take())  # job.progress() (core/features/progress.py)
                cursors.flush(conn, self.worker_id)  # job.save_cursor() (core/durable/cursors.py), fenced
                # the runs' log lines so far: a run killed after this keeps them (worker/runtime/job_logs.py)
                self.job_logs.flush(conn, self.worker_id)
                # the stacks operators asked of running jobs (worker/runtime/job_stacks.py)
                self.stacks.answer(conn, self.worker_id)
            if self.async_loop is not None:
                # an async handler cannot poll job.cancel_requested between awaits: cancel its task
                for job_id in kept:
                    if cancel.is_requested(job_id):
                        self.async_loop.cancel_job(job_id)
        except Exception as exc:
            if not is_connection_error(exc):
                log.exception("heartbeat failed")
            else:
                log.warning("heartbeat failed, database unavailable (%s)", describe_db_error(exc))
            return set()
        # ids acked while the heartbeat ran are not lost, just gone
        lost = self.ledger.still_held([i for i in ids if i not in kept])
        for job_id in lost:
            self.counters.lost_leases += 1
            log.warning("job %d: lease lost (reaped or released); its result will be dropped", job_id)
        return lost

    def write_progress(self) -> None:
        """Write what handlers reported with job.progress() and saved with job.save_cursor() since the last
        write (between heartbeats)."""
        reported = progress.take()
        if not reported and not cursors.pending(self.worker_id):
            return
        try:
            with self._row_writes, self._connect() as conn:
                state_changes.write_progress(conn, self.worker_id, reported)
                cursors.flush(conn, self.worker_id)
        except Exception as exc:  # progress is a display: a lost write is replaced by the next report; a
            # cursor lost here costs a resumed run the items since its previous write, as a SIGKILL would
            log.warning("progress not written (%s)", describe_db_error(exc) if is_connection_error(exc) else exc)

    def answer_stacks(self) -> None:
        """Between heartbeats: write the stacks asked of running jobs, if any was asked."""
        try:
            with self._connect() as conn:  # reads and writes job_stacks only: no row of jobs, no row_writes lock
                self.stacks.answer(conn, self.worker_id)
        except Exception as exc:  # the next heartbeat answers it
            log.warning("stack requests not read (%s)", describe_db_error(exc) if is_connection_error(exc) else exc)

    def run(self, interval: float, done: threading.Event) -> None:
        """The heartbeat thread: a pass every `interval` seconds until `done` is set, and in between
        the handlers' progress about once a second (PROGRESS_SECONDS) when there is any, and the stacks
        asked of running jobs (answer_stacks)."""
        if interval <= 0:
            return  # heartbeats disabled (tests of lease overrun)
        next_beat = time.monotonic() + interval
        while not done.wait(min(PROGRESS_SECONDS, max(0.0, next_beat - time.monotonic()))):
            if time.monotonic() >= next_beat:
                self.run_once()
                next_beat = time.monotonic() + interval
            else:
                if progress.pending() or cursors.pending(self.worker_id):
                    self.write_progress()
                if self.stacks.running():
                    self.answer_stacks()  # sooner than the next heartbeat: the console polls for it
