"""The shutdown: stop claiming, let running handlers finish within the grace, write their outcomes,
release to their queues what did not finish, then close the worker's threads and connections.

`Shutdown.run(resources)` is the whole sequence (the Worker calls it when its claim loop ends);
`release(ids)` is also the claimer's, for a hand-off that arrives after the worker stopped claiming.
"""

from __future__ import annotations

import logging
import os
import queue as queue_mod
import time
from typing import Any, Protocol

from psycopg_pool import ConnectionPool

from skiplock.core import state_changes
from skiplock.core.durable import cursors
from skiplock.core.features import handoff, worker_rows
from skiplock.runtime.executor import Executor, first_line
from skiplock.runtime.lanes import SYNC
from skiplock.runtime.listener import Listener
from skiplock.runtime.parts import WorkerParts

log = logging.getLogger("skiplock.worker")

ASYNC_CANCEL_SECONDS = 5.0  # how long cancelled coroutines get to unwind before their jobs are released
UNRECEIVED_WAIT_SECONDS = 5.0  # at a stop, how long to wait for a producer holding one of our tokens


class Resources(Protocol):
    """What the shutdown closes of the worker it ends (the runner's Worker), made in its run()."""

    @property
    def scheduler(self) -> Any: ...
    @property
    def health(self) -> Any: ...
    @property
    def listener(self) -> Listener | None: ...
    @property
    def pool(self) -> ConnectionPool | None: ...
    @property
    def claim_pool(self) -> ConnectionPool | None: ...
    @property
    def rows_pool(self) -> ConnectionPool | None: ...


class Shutdown:
    """Ends one worker: its held jobs finished, acked or released, then its resources closed."""

    def __init__(self, parts: WorkerParts, executor: Executor) -> None:
        self.settings = parts.settings
        self.worker_id = parts.worker_id
        self.ledger = parts.ledger
        self.signals = parts.signals
        self.executor = executor
        self.counters = parts.counters
        self._rows_connection = parts.rows_connection
        self._row_writes = parts.row_writes  # acks, heartbeats and releases one at a time (see WorkerParts)
        self.exit_hard = False  # the CLI: end the process with os._exit once released jobs are handed back

    def run(self, resources: Resources) -> None:
        """The whole shutdown, after the claim loop has ended."""
        unfinished = self.release_work()
        self.signals.acker_done.set()
        resources.scheduler.shutdown(wait=False)
        if resources.health is not None:
            resources.health.stop()
        if resources.listener:
            resources.listener.stop()
            self.release_unreceived()
        self._delete_worker_row(resources.pool)
        self.executor.stop_handlers()
        for pool in (resources.claim_pool, resources.rows_pool, resources.pool):
            if pool is not None:
                pool.close(timeout=2.0)
        log.info("worker %s stopped: %d ok, %d retried, %d dead, %d stale acks", self.worker_id,
                 self.counters.succeeded, self.counters.retried, self.counters.dead,
                 self.counters.stale_acks)
        if unfinished and self.exit_hard:
            # handler threads still run the released jobs; they must not keep the process alive
            logging.shutdown()
            os._exit(self.signals.exit_code)

    def release_work(self) -> list[int]:
        """Stop claiming, wait for running handlers within the grace, write the outcomes gathered,
        and release the jobs that did not finish to their queues. Returns those jobs' ids."""
        self.signals.stopped_claiming.set()
        self._release_prefetched()
        running = len(self.ledger.running_ids())
        if running:
            log.info("stopping: waiting up to %.0fs for %d in-flight job(s)",
                     self.settings.shutdown_grace, running)
            deadline = time.monotonic() + self.settings.shutdown_grace
            self.ledger.wait_idle(deadline, lambda: self.signals.skip_grace)
        async_loop = self.executor.async_loop
        if async_loop is not None:
            # coroutines still running after the grace are cancelled (they see CancelledError and
            # may clean up); their jobs stay in flight and are released below, at once
            cancelled = async_loop.cancel_running(ASYNC_CANCEL_SECONDS)
            if cancelled:
                log.info("cancelled %d async handler(s) still running after the grace period", cancelled)
        self._drain_acks(timeout=10.0)
        unfinished = self.ledger.unfinished()
        if unfinished:
            self._write_cursors(unfinished)
            self.release(unfinished)
        return unfinished

    def _release_prefetched(self) -> None:
        """Prefetched jobs that no slot is free for go back to their queues now, not after the grace.

        Claimed jobs for which a handler thread is idle still run within the grace, as they
        would have a moment later anyway; only the surplus waiting behind busy slots is released.
        """
        jobs = self.executor.jobs
        waiting: list[state_changes.ClaimedJob] = []
        while True:
            try:
                job = jobs.get_nowait()
            except queue_mod.Empty:
                break
            if job is not None:
                waiting.append(job)
        sync_held = sum(self.ledger.held_in(lane) for lane in self.ledger.lanes if lane.kind == SYNC)
        busy = sync_held - len(waiting)  # started, or being picked up right now
        idle = max(0, self.settings.concurrency - busy)
        for job in waiting[:idle]:
            jobs.put(job)
        for job in waiting[idle:]:
            self.ledger.given_back(job)
        if self.executor.async_loop is not None:
            # async jobs still waiting for a slot: none of their code ran, so they go back now
            for job in self.executor.async_loop.take_waiting():
                self.ledger.given_back(job)
        for runner in self.executor.batch_runners:
            # jobs gathered for a batch not started yet: none of their code ran, so they go back now
            for job in runner.take_waiting():
                self.ledger.given_back(job)

    def _drain_acks(self, timeout: float) -> None:
        acker = self.executor.acker
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.ledger.has_unacked() and not acker.waiting():
                return
            acker.write_now()  # write what is gathered now: the ack interval may be long
            time.sleep(0.01)
        log.warning("stopping with %d unwritten results (database unavailable); leases will expire",
                    len(self.ledger.known_ids()))

    def _write_cursors(self, ids: list[int]) -> None:
        """The cursors the unfinished runs saved since the last write, before their release ends the fence:
        the job resumes elsewhere from where this run got to. A sync handler still running cannot be
        stopped from outside: its next save_cursor() raises RunReleased, so it does no item the next run
        would redo."""
        cursors.release(self.worker_id, ids)  # first: a save after the write below would be lost
        try:
            with self._row_writes, self._rows_connection() as conn:
                written = cursors.flush(conn, self.worker_id, ids)
            if written:
                log.info("saved %d cursor(s) of the unfinished job(s)", written)
        except Exception as exc:
            log.warning("could not save the unfinished jobs' cursors (%s); they resume from the last write",
                        first_line(str(exc)))

    def release(self, ids: list[int]) -> None:
        """Put jobs this worker holds back to their queues, the run not counted."""
        try:
            with self._row_writes, self._rows_connection() as conn:
                released = state_changes.release_own(conn, self.worker_id, ids)
            log.info("released %d unfinished job(s) back to their queues: %s", len(released),
                     ",".join(map(str, released)))
        except Exception as exc:
            log.warning("could not release %d job(s) (%s); the reaper will return them after their lease",
                        len(ids), first_line(str(exc)))

    def release_unreceived(self) -> None:
        """At the end: a producer may have handed us a job the stopped listener never read."""
        known = self.ledger.known_ids()
        try:
            with self._row_writes, self._rows_connection() as conn:
                released = handoff.release_unreceived(conn, self.worker_id, known, UNRECEIVED_WAIT_SECONDS)
        except Exception as exc:
            log.warning("could not look for unreceived hand-offs (%s); the reaper returns any after their lease",
                        first_line(str(exc)))
            return
        if released:
            log.info("released %d job(s) handed to this worker as it stopped: %s", len(released),
                     ",".join(str(job_id) for job_id, _ in released))

    def _delete_worker_row(self, pool: ConnectionPool | None) -> None:
        assert pool is not None
        try:
            with pool.connection() as conn:
                worker_rows.remove(conn, self.worker_id)
        except Exception as exc:
            log.debug("could not delete worker row: %s", exc)
