"""The worker process: claim in batches, run handlers in a bounded pool, ack in batches.

Threads, and what each one owns:
- main thread: the claim loop. Claims up to the number of free slots in one statement, hands
  jobs to the handler pool, then sleeps until a NOTIFY, a freed slot or the poll interval.
- handler pool (`concurrency` threads): runs handlers; no transaction is open meanwhile.
- async loop (worker/runtime/async_pool.py, only when some queue has an `async def` handler): awaits
  those handlers, `async_concurrency` at once. Each kind has its own slots (worker/runtime/lanes.py).
- acker (worker/runtime/acker.py): gathers outcomes and writes each batch with one fenced
  statement; on a lost connection it keeps them and retries, so finished work is never forgotten.
- heartbeat (worker/runtime/heartbeat.py): extends the leases of running and not-yet-acked jobs.
Both work over the held-jobs ledger (worker/runtime/ledger.py); the Worker wires them.
- listener: LISTEN/NOTIFY wake-ups. APScheduler: reaper, worker registry, recurring, pruner.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import queue as queue_mod
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from skiplock import hooks
from skiplock.core import cancel, core, handoff, queries, tracing
from skiplock.core.config import Settings
from skiplock.core.db import (
    describe_db_error,
    is_connection_error,
    make_pool,
    prepared_statements,
    session_defaults,
    session_settings,
)
from skiplock.core.deadline import WATCHDOG
from skiplock.core.error_summary import headline
from skiplock.core.errors import ConfigError, SchemaMissing
from skiplock.core.registry import REGISTRY, JobContext, Registry, Task
from skiplock.core.status import HistoryMode
from skiplock.core.waiting import Waiting
from skiplock.recurring_defs import DEFINITIONS
from skiplock.runtime import outcomes
from skiplock.runtime.acker import Acker
from skiplock.runtime.async_pool import AsyncHandlerLoop
from skiplock.runtime.flow import WorkerFlow
from skiplock.runtime.heartbeat import Heartbeat
from skiplock.runtime.lanes import ASYNC, Lane, build_lanes
from skiplock.runtime.latency import LatencyRecorder, fold_exited
from skiplock.runtime.ledger import Counters, HeldJobs
from skiplock.runtime.listener import Listener
from skiplock.runtime.outcomes import MAX_ERROR_CHARS, format_error  # noqa: F401  (re-exported: older imports)
from skiplock.services.maintenance import add_service, build_scheduler
from skiplock.services.pruner import Pruner
from skiplock.services.reaper import Reaper
from skiplock.services.recurring_service import POLL_SECONDS, PRUNE_SECONDS, RecurringService
from skiplock.services.vacuum import VACUUM_CHECK_SECONDS, JobsVacuum

log = logging.getLogger("skiplock.worker")

WORKER_ROW_SECONDS = 5.0
SUCCESS_LINES_PER_SECOND = 20  # per-job INFO success lines per second before they move to DEBUG
ASYNC_CANCEL_SECONDS = 5.0  # how long cancelled coroutines get to unwind before their jobs are released
NOTIFY_CLAIM_WAIT_SECONDS = 0.05  # longest the listener waits for the claim loop's claim of a lane
# After a listener reconnect, how long and how often to look for jobs handed to the lost connection:
# long enough for a producer's transaction that took one of our old tokens to commit.
LOST_HANDOFF_WINDOW_SECONDS = 60.0
LOST_HANDOFF_CHECK_SECONDS = 2.0
UNRECEIVED_WAIT_SECONDS = 5.0  # at a stop, how long to wait for a producer holding one of our tokens
# A claim that found some jobs but fewer than it asked for means jobs are arriving one by one. The
# loop then waits this long before it claims again, even when the jobs it just started have finished
# (their finish would wake it at once): the jobs that arrive meanwhile come in one claim. Claiming
# on every finish took a few jobs per claim, and each claim and its ack cost the database as much
# as the producers' inserts (16 pgbench producers with two workers keeping up, same machine: 8,300
# inserts/s; with 2 / 5 / 10 / 25 ms here 9,300 / 9,250 / 9,800 / 10,100; workers that only poll
# each second, 11,000). A job that arrives while a worker is busy waits at most this much longer; an
# idle worker's pickup is unchanged (its claim found nothing, so it registers as a waiter instead).
ARRIVALS_LINGER_SECONDS = 0.005
# A worker still running jobs shorter than this on average needs no NOTIFY: the first one to finish
# wakes its claim loop within about this long. Registering as a waiter on each short claim would
# make a producer pay for a NOTIFY per claim while workers keep up with the load (migration 015).
WOKEN_BY_FINISH_SECONDS = 0.005


def make_worker_id() -> str:
    """host:pid:random; unique across restarts so a new process never inherits an old fence."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def first_line(text: str | None) -> str:
    """An error's headline for log lines: the one definition the console groups by too."""
    return headline(text)


class SuccessLogBudget:
    """Decides the level of each success line: INFO within a per-second budget, DEBUG beyond it.

    When a second closes with lines moved to DEBUG, one INFO summary line counts them.
    """

    def __init__(self, per_second: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_second = per_second
        self._clock = clock
        self._lock = threading.Lock()
        self._window = 0
        self._used = 0
        self._moved = 0

    def level(self) -> int:
        """The level for the next success line (and emit the previous second's summary if due)."""
        now = int(self._clock())
        with self._lock:
            if now != self._window:
                moved, self._moved = self._moved, 0
                self._window, self._used = now, 0
            else:
                moved = 0
            self._used += 1
            within = self._used <= self.per_second
            if not within:
                self._moved += 1
        if moved:
            log.info("%d more jobs ok in the last second (success lines above %d/s are logged at DEBUG)",
                     moved, self.per_second)
        return logging.INFO if within else logging.DEBUG


class Worker:
    """One worker process's runtime. `run()` blocks until SIGTERM/SIGINT or `request_stop()`."""

    def __init__(self, settings: Settings, registry: Registry = REGISTRY,
                 queues: list[str] | None = None) -> None:
        self.settings = settings
        self.url = settings.require_database_url()
        self.registry = registry
        self.queues = self._resolve_queues(queues)
        self.tasks: dict[str, Task] = {q: t for q in self.queues if (t := registry.get(q)) is not None}
        self.leases = [self._lease_for(q) for q in self.queues]
        # Claim the JobContext columns only when some handler declares `job` (see core.claim).
        self._wants_context = any(t.wants_job for t in self.tasks.values())
        self.flow = WorkerFlow(self.tasks)  # versions, tenant cursor, limited queues (worker/runtime/flow.py)
        self.worker_id = make_worker_id()
        self.counters = Counters()
        self.latency = LatencyRecorder()  # claim/ack/handler histograms, saved with the worker row
        self.loop_tick = time.monotonic()  # last claim-loop turn, for the health endpoint
        self.health: Any = None  # skiplock.runtime.health.HealthServer when --health-port is set
        self.pool: ConnectionPool | None = None
        self.claim_pool: ConnectionPool | None = None  # the claim loop's own connection (see run())
        self.rows_pool: ConnectionPool | None = None  # acks, heartbeats and the release (see run())
        self._stop = threading.Event()
        self._stopped_claiming = threading.Event()
        self._wake = threading.Event()
        # waiter rows ask producers' insert trigger for a NOTIFY while this worker is idle
        self._waiting = Waiting(lambda: self._pool_connection(), self.worker_id, list(self.queues), self.leases,
                                [self.tasks[q].version for q in self.queues])
        # after a listener reconnect, until this monotonic time: look for hand-offs lost with the old
        # connection (see _release_lost_handoffs)
        self._lost_handoffs_until = 0.0
        self._lock = threading.Lock()
        # The ack, the heartbeat and the shutdown release lock the same running rows from different
        # connections, in different orders: concurrently they deadlock (PostgreSQL aborts one
        # after deadlock_timeout; seen in the fault suite). One at a time per worker, they cannot.
        self._row_writes = threading.Lock()
        self.held = HeldJobs(self._lock)  # running handlers, and finished jobs not yet acked
        self._idle = threading.Condition(self._lock)  # notified when the last running handler ends
        self._acker_done = threading.Event()  # set at the very end of shutdown: stops acker/heartbeat
        self._skip_grace = False
        self._exit_hard = False
        # Handler threads take jobs from a SimpleQueue: a put/get costs ~3 us of CPU per job,
        # a ThreadPoolExecutor submit (Future, locks, work item) ~15 us, on the hot path.
        self._jobs: queue_mod.SimpleQueue[core.ClaimedJob | None] = queue_mod.SimpleQueue()
        # Sync and async queues each have their own slots and claim sizing (how many claimed jobs
        # to hold, and when to claim again; see worker/runtime/prefetch.py), re-planned every turn.
        self.lanes = build_lanes(settings, self.tasks, self.queues, self.leases)
        self._lane_of: dict[str, Lane] = {q: lane for lane in self.lanes for q in lane.queues}
        self.async_loop: AsyncHandlerLoop | None = None
        if any(lane.kind == ASYNC for lane in self.lanes):
            self.async_loop = AsyncHandlerLoop(settings.async_concurrency, self._execute_async)
        self.acker = Acker(self._rows_connection, self.worker_id, self.held, self._row_writes, self.counters,
                           self.latency, batch=settings.ack_batch, interval=settings.ack_interval,
                           history=settings.history, on_written=self._after_ack)
        self.heartbeat = Heartbeat(self._rows_connection, self.worker_id, self.held, self._row_writes,
                                   self.counters, self._lease_for, self.async_loop)
        self._claim_backoff = 0.1
        self._wake_on_start = False  # set by _claim_on_notify: the next handler to start wakes the claim loop
        self._never_started: list[int] = []  # claimed, not run because we are stopping
        self._success_log = SuccessLogBudget(SUCCESS_LINES_PER_SECOND)
        self.listener: Listener | None = None
        self.scheduler = build_scheduler()
        self.reaper: Reaper | None = None
        self._threads: list[threading.Thread] = []
        self._handlers: list[threading.Thread] = []

    # ---- set-up ---------------------------------------------------------------------------

    def _resolve_queues(self, queues: list[str] | None) -> list[str]:
        chosen = list(queues or self.settings.queues or self.registry.queues())
        if not chosen:
            raise ConfigError("no queues to work: register handlers with @task in a module named by "
                              "SKIPLOCK_TASKS/--tasks, or pass --queues")
        missing = [q for q in chosen if self.registry.get(q) is None]
        if missing:
            raise ConfigError(f"no handler registered for queue(s) {', '.join(missing)}; "
                              f"known: {', '.join(self.registry.queues()) or 'none'}")
        return chosen

    def _lease_for(self, queue: str) -> float:
        task = self.registry.get(queue)
        if queue in self.settings.queue_leases or task is None or task.lease_seconds is None:
            return self.settings.lease_for(queue)
        return float(task.lease_seconds)

    @property
    def app_name(self) -> str:
        return f"skiplock-worker {self.worker_id.rsplit(':', 1)[-1]}"

    # ---- public controls ------------------------------------------------------------------

    def wake(self) -> None:
        """Make the claim loop look for work now."""
        self._wake.set()

    def request_stop(self) -> None:
        """Begin a graceful shutdown (what SIGTERM/SIGINT do); a second call skips the grace."""
        if self._stop.is_set():
            self._stopped_claiming.set()
            self._skip_grace = True
        self._stop.set()
        self._wake.set()

    @property
    def stopping(self) -> bool:
        """True once a graceful shutdown has begun (the health endpoint then answers 503)."""
        return self._stop.is_set()

    def in_flight_ids(self) -> list[int]:
        with self._lock:
            return list(self.held.running)

    # ---- main ------------------------------------------------------------------------------

    def run(self, install_signals: bool = True, exit_hard: bool = False) -> int:
        """Work until stopped; return the process exit code (0 after a clean shutdown).

        `exit_hard` (the CLI) ends the process with os._exit once released jobs are handed back,
        because their handler threads may still be running and must not hold the process open.
        """
        self._exit_hard = exit_hard
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.request_stop())
        # The pool's connections (SKIPLOCK_POOL_SIZE, at least 3): one is the row writers' (below),
        # the rest serve the reaper, the worker registry and the other services.
        self.pool = make_pool(self.url, self.app_name, size=max(self.settings.pool_size, 3) - 1)
        self._check_schema()
        self._start_flow()
        # The claim loop's own connection, whose claims commit without waiting for their WAL flush:
        # a claim lost in a server crash puts its jobs back to queued, where they run again, as
        # at-least-once allows for anything in flight at a crash; the flush of the next durable
        # commit (an ack, an enqueue) writes it anyway. The flush was most of an idle pickup
        # (1.9-2.0 ms of claim against 0.9-1.0 without it, alternating runs on this machine).
        # Like every pooled connection it runs with JIT off (db.session_defaults), and without bitmap
        # scans (core.claim_session). Behind PgBouncer in transaction mode a session setting would leak
        # to other clients' transactions, so there (db.session_settings) claims stay synchronous and
        # JIT is the server's (README "Latency against load").
        self.claim_pool = make_pool(self.url, self.app_name, size=1,
                                    configure=_claims_commit_async)
        # The ack, the heartbeat and the shutdown release run one at a time (_row_writes), on one
        # connection of their own: every statement on it names rows by id, so it is planned once
        # and without sequential scans (core.row_writes_session). Behind PgBouncer in transaction
        # mode no session setting is made (db.session_settings), so there each ack is planned for
        # its own values, as every statement is (and with prepared statements off, nothing is prepared).
        self.rows_pool = make_pool(self.url, self.app_name, size=1,
                                   configure=core.row_writes_session)
        self.reaper = Reaper(self.pool)
        log.info("worker %s starting: queues=%s concurrency=%d async_concurrency=%s batch=%d", self.worker_id,
                 ",".join(self.queues), self.settings.concurrency,
                 self.settings.async_concurrency if self.async_loop else "-", self.settings.batch_size)
        self._start_threads()
        try:
            self._claim_loop()
        finally:
            self._shutdown()
        return 0

    def _check_schema(self) -> None:
        """Fail fast with a fix-it message when migrations were never applied to this database."""
        assert self.pool is not None
        try:
            with self.pool.connection() as conn:
                found = conn.execute("SELECT to_regclass('jobs') IS NOT NULL").fetchone()
        except Exception as exc:
            if is_connection_error(exc):
                return  # the database is not up yet; the claim loop waits for it
            raise
        if not (found and found[0]):
            self.pool.close()
            raise SchemaMissing()

    def _start_flow(self) -> None:
        """Write @task-declared limits; a database still down leaves them to the next start."""
        assert self.pool is not None
        try:
            with self.pool.connection() as conn:
                self.flow.start(conn)
        except Exception as exc:
            if not is_connection_error(exc):
                raise

    def _start_threads(self) -> None:
        self.listener = self._new_listener()
        self.listener.start()
        for target, args, name in ((self.acker.run, (self._acker_done,), "skiplock-acker"),
                                   (self.heartbeat.run, (self.settings.effective_heartbeat, self._acker_done),
                                    "skiplock-heartbeat")):
            thread = threading.Thread(target=target, args=args, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        if self.async_loop is not None:
            self.async_loop.start()
        sync_slots = self.settings.concurrency if any(lane.kind != ASYNC for lane in self.lanes) else 0
        for index in range(sync_slots):
            # daemons: a handler still running a released job must not hold the process open
            thread = threading.Thread(target=self._handler_loop, name=f"skiplock-handler_{index}", daemon=True)
            thread.start()
            self._handlers.append(thread)
        self._start_services()
        self.scheduler.start()

    def _new_listener(self) -> Listener:
        """The listener thread: LISTEN, hand-offs, and the claim for an idle lane on its own connection."""
        return Listener(self.settings.session_url, set(self.queues), self.wake,
                        f"skiplock-listener {self.worker_id.rsplit(':', 1)[-1]}",
                        on_connect=self._listening, on_taken=self._waiting.taken,
                        on_notify=self._claim_on_notify, configure=_listener_session,
                        on_handoff=self._on_handoff)

    def _start_services(self) -> None:
        """Every service on the worker's scheduler, in one list: nothing registers itself on import."""
        assert self.pool is not None and self.reaper is not None
        pool = self.pool
        if self.settings.health_port:
            from skiplock.runtime.health import HealthServer

            self.health = HealthServer(self, self.settings.health_port)
            self.health.start()

        def fold() -> None:  # latency rows of workers gone for an hour become one 'exited' row
            with pool.connection() as conn:
                fold_exited(conn)

        recurring = RecurringService(pool, DEFINITIONS.values(), self.registry.queues(),
                                     scheduler=self.scheduler, wake=self.wake, wake_queues=self.queues)
        services: list[tuple[str, Callable[[], Any], float]] = [
            ("reaper", self.reaper.run_once, self.settings.reaper_interval),
            ("vacuum", JobsVacuum(pool, self.settings.vacuum_dead_rows, advisory_lock=session_settings()).run_once,
             VACUUM_CHECK_SECONDS),
            ("worker-registry", self._refresh_worker_row, WORKER_ROW_SECONDS),
            ("latency-fold", fold, 600.0),
            ("recurring", recurring.tick, POLL_SECONDS),  # recurring slots, enqueued once each
            ("pruner", Pruner(pool, self.settings).run_once, PRUNE_SECONDS),
            ("lost-handoffs", self._release_lost_handoffs, LOST_HANDOFF_CHECK_SECONDS),
            ("recurring-slots-prune", recurring.prune_slots, PRUNE_SECONDS),
        ]
        if self.settings.history == HistoryMode.PARTITIONED:
            from skiplock.services.history import HistoryPartitions

            services.append(("history-partitions", HistoryPartitions(pool, self.settings.history_retention).run_once,
                             3600.0))
        for name, run_once, every_seconds in services:
            add_service(self.scheduler, name, run_once, every_seconds)

    def _claim_loop(self) -> None:
        while not self._stop.is_set():
            self.loop_tick = time.monotonic()
            self._wake.clear()
            claimed_full = backed_off = drained = False
            found = 0
            for lane in self.lanes:  # one claim per handler kind, sized from that kind's free slots
                lane.plan = capacity, threshold = lane.sizing.plan()
                with self._lock:
                    free = capacity - lane.held
                    busy = lane.held > 0
                # A claim is a round trip and a commit: take a few places only when nothing is held,
                # else wait until enough are open to be worth it (_finish wakes us at the threshold).
                if free > 0 and (free >= threshold or not busy):
                    if not busy and lane.found_nothing and not self._finish_wakes_soon():
                        # Its last claim found nothing, so this one likely would too, and an idle
                        # lane's empty claim is followed by a registration and another claim (below).
                        # Registering first makes this claim that second one (Lane.found_nothing).
                        self._waiting.enter()
                    want = min(free, self.settings.batch_size)
                    with lane.claiming:  # the listener may be claiming for this lane (_claim_on_notify)
                        jobs = self._claim_or_back_off(lane, want)
                        if jobs is not None:
                            self._start_jobs(lane, jobs)
                    if jobs is None:
                        backed_off = True  # database unavailable: the back-off has waited already
                        break
                    claimed_full = claimed_full or len(jobs) == want
                    found += len(jobs)
                    drained = drained or len(jobs) < want
            if backed_off:
                continue
            if claimed_full:
                # a backlog: claim again as soon as slots allow. A waiter token still out costs the
                # next producer one NOTIFY, once: cheaper than a round trip to take it back here.
                continue
            if drained and found:
                self._stop.wait(ARRIVALS_LINGER_SECONDS)  # jobs arriving one by one: see the constant
                continue
            # only a claim that found fewer jobs than it wanted means "idle"; with every slot busy no
            # claim was made, and a NOTIFY is not needed: a finishing job wakes this loop
            if drained and not self._finish_wakes_soon() and self._waiting.enter():
                continue  # just registered as a waiter: claim once more, a job may have committed meanwhile
            self._wake.wait(self.flow.idle_wait(self.queues, self.settings.poll_interval))

    def _finish_wakes_soon(self) -> bool:
        """Some lane runs jobs that end within WOKEN_BY_FINISH_SECONDS: its _finish wakes the loop."""
        with self._lock:
            busy = [lane for lane in self.lanes if lane.held > 0]
        return any(lane.sizing.handlers_shorter_than(WOKEN_BY_FINISH_SECONDS) for lane in busy)

    def _claim_or_back_off(self, lane: Lane, want: int) -> list[core.ClaimedJob] | None:
        """Claim for `lane`; on a lost database, wait with a growing back-off and return None."""
        try:
            jobs = self._claim(lane, want)
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            self.counters.claim_errors += 1
            log.warning("claim failed, database unavailable (%s); retrying in %.1fs",
                        describe_db_error(exc), self._claim_backoff)
            self._stop.wait(self._claim_backoff)
            self._claim_backoff = min(self._claim_backoff * 2, 5.0)
            return None
        self._claim_backoff = 0.1
        return jobs

    def _claim_on_notify(self, conn: psycopg.Connection) -> bool:
        """The listener's NOTIFY: claim for each idle lane on the listener's own connection, now.

        An idle pickup was ~1.6 ms from the producer's commit to the handler's start, and 1.1-1.4 ms
        of it was the claim statement on the claim loop's connection, whose backend (and vCPU) had
        slept since the last job: the same claim took ~0.4 ms back to back. The listener's backend
        has just run to deliver the NOTIFY, and claiming here also saves waking the claim loop
        first. Only a lane holding nothing, and only when the claim loop is not claiming for it.
        True when it started jobs of the sync lane: their handler thread wakes the claim loop, or,
        when the claim left the queue empty and the jobs are short, the lane's last finish does.
        """
        started_sync = False
        for lane in self.lanes:
            # The claim loop may be claiming for this lane now (a poll, or the claim after a finish):
            # its snapshot may predate the job this NOTIFY is about. Wait for it briefly rather than
            # leave the job to the loop's next round (a waiter registration and another claim: the
            # 3-5 ms tail of idle pickups); a loop stuck backing off from a lost database is not waited for.
            if not lane.claiming.acquire(timeout=NOTIFY_CLAIM_WAIT_SECONDS):
                continue
            try:
                with self._lock:
                    free = lane.plan[0] - lane.held
                    idle = lane.held == 0
                if idle and free > 0 and not self._stop.is_set():
                    want = min(free, self.settings.batch_size)
                    jobs = self._claim(lane, want, conn)
                    if jobs and lane.kind != ASYNC:
                        started_sync = True
                        if len(jobs) < want and lane.sizing.handlers_shorter_than(WOKEN_BY_FINISH_SECONDS):
                            # This claim left the queue empty and its jobs end within milliseconds:
                            # looking again now would find nothing (a claim in the middle of the
                            # batch's starts, competing with them for the CPU). The lane's last
                            # finish wakes the loop, which then registers first and claims once
                            # (Lane.found_nothing). Two workers sent 80 jobs made 6.3 claims a batch.
                            lane.found_nothing = True
                        else:
                            # the claim loop still has to look again (a backlog, or long jobs: it
                            # registers as a waiter while they run): woken by the handler thread once
                            # it has the job, so that this wake-up does not compete with the handler's
                            # own start for the GIL (claimed -> handler start: 0.27 ms with the
                            # listener waking the loop, 0.14 ms this way, measured)
                            self._wake_on_start = True
                    self._start_jobs(lane, jobs)
            finally:
                lane.claiming.release()
        return started_sync

    def _listening(self, conn: psycopg.Connection, key: int | None) -> None:
        """The listener (re)connected holding hand-off key `key`: our tokens carry it from now on.

        On a reconnect, a producer may have handed us a job whose NOTIFY went to the lost connection:
        look for such jobs for a while (a producer holding one of our old tokens may commit later)."""
        if self.listener is not None and self.listener.reconnects > 0:
            self._lost_handoffs_until = time.monotonic() + LOST_HANDOFF_WINDOW_SECONDS
        self._waiting.listening(conn, key)

    def _on_handoff(self, conn: psycopg.Connection, payload: str) -> bool | None:
        """A producer's hand-off (migration 020): start the job it claimed for us, with no claim.

        False: another worker's. True: started in the sync lane (its handler thread wakes the claim
        loop, which claims what else is there and registers as a waiter again). None: ours otherwise."""
        worker_id, job = handoff.parse(payload)
        if worker_id != self.worker_id:
            return False
        self.counters.handed_off += 1
        if tracing.enabled():  # the enqueue span's context, for the run span's link
            with WATCHDOG.guard(conn, self.listener.deadline if self.listener else 0.0):
                tracing.remember_contexts(conn, [job.id])
        if self._stopped_claiming.is_set():
            self._release([job.id])  # too late to start it: back to its queue, the run not counted
            return None
        lane = self._lane_of[job.queue]
        if lane.kind == ASYNC:
            self._start_jobs(lane, [job])
            return None
        self._wake_on_start = True
        self._start_jobs(lane, [job])
        return True

    def _release_lost_handoffs(self) -> None:
        """Within the window after a listener reconnect: release jobs handed to us and never received."""
        if time.monotonic() >= self._lost_handoffs_until:
            return
        with self._lock:
            known = [*self.held.running, *self.held.unacked]
        with self._row_writes, self._rows_connection() as conn:
            released = handoff.release_lost(conn, self.worker_id, known)
        if released:
            log.warning("released %d job(s) handed to this worker whose NOTIFY was lost with the listener's "
                        "connection: %s", len(released), ",".join(str(job_id) for job_id, _ in released))
            self.wake()

    def _claim_connection(self, notify_conn: psycopg.Connection | None) -> Any:
        """The connection a claim runs on: the listener's when it claims on a NOTIFY, else the claim loop's."""
        if notify_conn is not None:
            return contextlib.nullcontext(notify_conn)
        assert self.claim_pool is not None
        return self.claim_pool.connection()

    def _claim(self, lane: Lane, limit: int, notify_conn: psycopg.Connection | None = None) -> list[core.ClaimedJob]:
        """Claim up to `limit` jobs for `lane` on the claim loop's connection (or the listener's)."""
        started = time.perf_counter()
        with self._claim_connection(notify_conn) as conn:
            jobs = core.claim(conn, self.worker_id, lane.queues, lane.leases, limit, payload_as_text=True,
                              with_context=self._wants_context,
                              **self.flow.claim_options(conn, lane.queues, refresh=notify_conn is None))
            self.flow.observe(jobs)
            tracing.remember_contexts(conn, [j.id for j in jobs])  # a no-op without OpenTelemetry
        elapsed = time.perf_counter() - started
        lane.found_nothing = not jobs
        if jobs:  # an empty claim writes nothing, so it skips the commit's WAL flush: not typical
            lane.sizing.observe_claim(elapsed)
        self.latency.observe("claim", elapsed)
        self.latency.observe("claim_batch", len(jobs))
        self.counters.claimed += len(jobs)
        if len(self.counters.claim_seconds) < 10_000:
            self.counters.claim_seconds.append(elapsed)
        return jobs

    def _start_jobs(self, lane: Lane, jobs: list[core.ClaimedJob]) -> None:
        if not jobs:
            return
        with self._lock:
            for job in jobs:
                self.held.running[job.id] = job
            lane.held += len(jobs)
        if lane.kind == ASYNC:
            assert self.async_loop is not None
            self.async_loop.submit(jobs)  # one thread-safe hand-over per batch
        else:
            for job in jobs:
                self._jobs.put(job)

    # ---- one job ---------------------------------------------------------------------------

    def _handler_loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            if self._wake_on_start:  # a job the listener claimed (_claim_on_notify)
                self._wake_on_start = False
                self._wake.set()
            try:
                self._execute(job)
            except Exception:  # a bug in our own bookkeeping: keep the thread, the lease will expire
                log.exception("job %d: internal error after its handler ran", job.id)

    def _execute(self, job: core.ClaimedJob) -> None:
        task = self.tasks[job.queue]
        tracing.start_run(job.id, job.queue, job.attempts)  # OpenTelemetry run span, when installed
        started = time.perf_counter()
        context: JobContext | None = None
        try:
            payload = self.flow.upgrade(job, json.loads(job.payload))  # claimed as text (see _claim)
            # the context is built only for handlers that declare `job`: most do not, and it is
            # a frozen dataclass of ten fields, built per job
            context = self._context(job) if task.wants_job else None
            result = task.func(payload, job=context) if context is not None else task.func(payload)
            outcomes.check_result(job, result)
            outcome = outcomes.succeeded(job)
        except BaseException as exc:  # KeyboardInterrupt/SystemExit from a handler are its failure
            outcome = self._failure_outcome(job, exc)
        self._record(job, outcome, started, context)

    async def _execute_async(self, job: core.ClaimedJob) -> None:
        """_execute for an `async def` handler, awaited on the worker's event loop thread."""
        task = self.tasks[job.queue]
        tracing.start_run(job.id, job.queue, job.attempts)  # per task: tracing keeps it in a ContextVar
        started = time.perf_counter()
        context: JobContext | None = None
        try:
            payload = self.flow.upgrade(job, json.loads(job.payload))
            if task.wants_job:
                context = self._context(job)
                await task.func(payload, job=context)
            else:
                await task.func(payload)
            outcome = outcomes.succeeded(job)
        except asyncio.CancelledError as exc:
            current = asyncio.current_task()
            if cancel.is_requested(job.id):
                # an operator's cancel (the heartbeat saw it and cancelled this task): the run ends,
                # and _record's cancel.override makes it failed "cancelled by <who>"
                if current is not None:
                    current.uncancel()
                outcome = self._failure_outcome(job, exc)
            elif current is not None and current.cancelling():
                # cancelled by the shutdown after its grace: no outcome, the job stays in flight
                # and _shutdown releases it to its queue at once (the attempt does not count)
                raise
            outcome = self._failure_outcome(job, exc)  # the handler's own code raised it
        except BaseException as exc:
            outcome = self._failure_outcome(job, exc)
        self._record(job, outcome, started, context)

    def _failure_outcome(self, job: core.ClaimedJob, exc: BaseException) -> core.Outcome:
        """What a handler's exception means for its job (worker/runtime/outcomes.py); the hooks are told."""
        outcome = outcomes.for_exception(job, exc, backoff_base=self.settings.backoff_base,
                                         backoff_cap=self.settings.backoff_cap)
        hooks.failed(job, exc, outcome)  # on_failure/on_dead (worker/hooks.py); never changes the outcome
        return outcome

    def _record(self, job: core.ClaimedJob, outcome: core.Outcome, started: float,
                context: JobContext | None = None) -> None:
        """Time the handler, then hand its outcome to the acker (unless the handler completed the job
        itself with job.complete(conn) / complete_async(conn))."""
        seconds = time.perf_counter() - started
        outcome = cancel.override(outcome)  # a run asked to stop ends failed "cancelled by <who>"
        if outcome.status != "ok":  # the attempt history (worker/core/attempts.py) lists each failure's duration
            outcome = outcome._replace(duration_ms=round(seconds * 1000, 1))
        tracing.end_run(outcome.status, outcome.error)
        self.latency.observe("handler", seconds)
        self._lane_of[job.queue].sizing.observe_handler(seconds)
        duration_ms = seconds * 1000
        # job.complete(conn) already wrote the success in the handler's transaction: no second ack
        self._finish(job, outcome, duration_ms,
                     acked=outcome.status == "ok" and context is not None and context.completed_in_transaction)

    def _context(self, job: core.ClaimedJob) -> JobContext:
        # claimed with its context columns: a handler that declares `job` makes _wants_context true
        assert job.priority is not None and job.run_at is not None
        assert job.created_at is not None and job.started_at is not None
        return JobContext(job.id, job.queue, job.attempts, job.max_attempts, job.priority, job.run_at,
                          job.created_at, job.started_at, job.unique_key, self.worker_id,
                          self.settings.history)

    def _finish(self, job: core.ClaimedJob, outcome: core.Outcome, duration_ms: float,
                acked: bool = False) -> None:
        if outcome.status == "ok":
            # One INFO line per success until SUCCESS_LINES_PER_SECOND; above that they go to DEBUG
            # and a per-second summary says how many: under load, formatting and the handler lock
            # shared by every thread cost more than the jobs themselves. Failures always log.
            level = self._success_log.level()
            if log.isEnabledFor(level):
                log.log(level, "job %d queue=%s attempt=%d/%d ok in %.1fms", job.id, job.queue, job.attempts,
                        job.max_attempts, duration_ms, extra=_log_fields(job, outcome, duration_ms))
        elif outcome.status == "snoozed":  # the handler's choice, not a failure (worker/core/snooze.py)
            log.info("job %d queue=%s snoozed for %.1fs, attempt not counted", job.id, job.queue, outcome.delay,
                     extra=_log_fields(job, outcome, duration_ms))
        else:
            verb = {"queued": f"failed, retry in {outcome.delay:.1f}s", "dead": "failed, now dead",
                    "failed": "discarded"}[outcome.status]
            log.warning("job %d queue=%s attempt=%d/%d %s after %.1fms: %s", job.id, job.queue,
                        job.attempts, job.max_attempts, verb, duration_ms, first_line(outcome.error),
                        extra=_log_fields(job, outcome, duration_ms))
        lane = self._lane_of[job.queue]
        with self._lock:
            if self.held.running.pop(job.id, None) is not None:
                lane.held -= 1
            if not self.held.running:
                self._idle.notify_all()
            if acked:
                self.counters.succeeded += 1
            else:
                self.held.unacked[job.id] = job.queue
            capacity, threshold = lane.plan
            free = capacity - lane.held
            idle = not lane.held
        slot_freed = False
        if not acked:
            self.acker.put(outcome)  # wakes the acker at once when a whole batch is waiting
        elif self.flow.note_finished({job.queue}):
            slot_freed = True  # completed in the handler's transaction: a limited queue's slot is free now
        # After a claim that found nothing, only the lane's last finish wakes the loop: a claim at
        # the threshold would find nothing again unless jobs arrived meanwhile (Lane.found_nothing).
        wake = idle or slot_freed or (free >= threshold and not lane.found_nothing)
        if wake and not self._wake.is_set():
            self._wake.set()

    def _after_ack(self, outcomes: list[core.Outcome], keys_freed: bool) -> None:
        """An ack batch is written: its limited queues' slots are free in the database now, so the
        next claim includes them at once (see LIMITED_CLAIM_INTERVAL in worker/runtime/flow.py); and
        a lock key it ended lets that key's next job be claimed, which no NOTIFY would announce (a
        chain of 5 jobs of one key on an idle worker took 4 s, one per poll, before this)."""
        if self.flow.note_finished({outcome.queue for outcome in outcomes}) or keys_freed:
            self._wake.set()

    def _give_back(self, job: core.ClaimedJob) -> None:
        """Forget a claimed job that was never started; shutdown releases it to its queue."""
        with self._lock:
            if self.held.running.pop(job.id, None) is not None:
                self._lane_of[job.queue].held -= 1
            self._never_started.append(job.id)
            if not self.held.running:
                self._idle.notify_all()

    # ---- the worker row ------------------------------------------------------------------------

    def _refresh_worker_row(self) -> None:
        assert self.pool is not None
        with self.pool.connection() as conn:
            conn.execute(queries.WORKER_UPSERT, {
                "id": self.worker_id, "host": socket.gethostname(), "pid": os.getpid(),
                # slots of both kinds this worker runs (threads and async), for the console's gauges
                "queues": self.queues, "concurrency": sum(lane.slots for lane in self.lanes),
                "in_flight": len(self.held.running), "task_versions": json.dumps(self.flow.versions())})
            self.latency.save(conn, self.worker_id)

    # ---- shutdown ------------------------------------------------------------------------------

    def _shutdown(self) -> None:
        self._stopped_claiming.set()
        self._release_prefetched()
        with self._lock:
            running = len(self.held.running)
        if running:
            log.info("stopping: waiting up to %.0fs for %d in-flight job(s)",
                     self.settings.shutdown_grace, running)
            deadline = time.monotonic() + self.settings.shutdown_grace
            with self._lock:
                while self.held.running and not self._skip_grace and time.monotonic() < deadline:
                    # short waits so a second signal (skip the grace) is seen promptly
                    self._idle.wait(timeout=min(0.1, max(deadline - time.monotonic(), 0.0)))
        if self.async_loop is not None:
            # coroutines still running after the grace are cancelled (they see CancelledError and
            # may clean up); their jobs stay in flight and are released below, at once
            cancelled = self.async_loop.cancel_running(ASYNC_CANCEL_SECONDS)
            if cancelled:
                log.info("cancelled %d async handler(s) still running after the grace period", cancelled)
        self._drain_acks(timeout=10.0)
        with self._lock:
            unfinished = [*self._never_started, *self.held.running]
        if unfinished:
            self._release(unfinished)
        self._acker_done.set()
        self.scheduler.shutdown(wait=False)
        if self.health is not None:
            self.health.stop()
        if self.listener:
            self.listener.stop()
            self._release_unreceived()
        self._delete_worker_row()
        for _ in self._handlers:
            self._jobs.put(None)  # idle handler threads end; busy ones are daemons (see below)
        if self.async_loop is not None:
            self.async_loop.stop()
        if self.claim_pool is not None:
            self.claim_pool.close(timeout=2.0)
        if self.rows_pool is not None:
            self.rows_pool.close(timeout=2.0)
        if self.pool is not None:
            self.pool.close(timeout=2.0)
        log.info("worker %s stopped: %d ok, %d retried, %d dead, %d stale acks", self.worker_id,
                 self.counters.succeeded, self.counters.retried, self.counters.dead,
                 self.counters.stale_acks)
        if unfinished and self._exit_hard:
            # handler threads still run the released jobs; they must not keep the process alive
            logging.shutdown()
            os._exit(0)

    def _release_prefetched(self) -> None:
        """Prefetched jobs that no slot is free for go back to their queues now, not after the grace.

        Claimed jobs for which a handler thread is idle still run within the grace, as they
        would have a moment later anyway; only the surplus waiting behind busy slots is released.
        """
        waiting: list[core.ClaimedJob] = []
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue_mod.Empty:
                break
            if job is not None:
                waiting.append(job)
        with self._lock:
            sync_held = sum(lane.held for lane in self.lanes if lane.kind != ASYNC)
        busy = sync_held - len(waiting)  # started, or being picked up right now
        idle = max(0, self.settings.concurrency - busy)
        for job in waiting[:idle]:
            self._jobs.put(job)
        for job in waiting[idle:]:
            self._give_back(job)
        if self.async_loop is not None:
            # async jobs still waiting for a slot: none of their code ran, so they go back now
            for job in self.async_loop.take_waiting():
                self._give_back(job)

    def _drain_acks(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                waiting = bool(self.held.unacked)
            if not waiting and not self.acker.waiting():
                return
            self.acker.write_now()  # write what is gathered now: the ack interval may be long
            time.sleep(0.01)
        log.warning("stopping with %d unwritten results (database unavailable); leases will expire",
                    len(self.held.unacked))

    def _release(self, ids: list[int]) -> None:
        try:
            with self._row_writes, self._rows_connection() as conn:
                released = core.release_own(conn, self.worker_id, ids)
            log.info("released %d unfinished job(s) back to their queues: %s", len(released),
                     ",".join(map(str, released)))
        except Exception as exc:
            log.warning("could not release %d job(s) (%s); the reaper will return them after their lease",
                        len(ids), first_line(str(exc)))

    def _release_unreceived(self) -> None:
        """At the end: a producer may have handed us a job the stopped listener never read."""
        with self._lock:
            known = [*self.held.running, *self.held.unacked]
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

    def _pool_connection(self) -> Any:
        assert self.pool is not None
        return self.pool.connection()

    def _rows_connection(self) -> Any:
        assert self.rows_pool is not None
        return self.rows_pool.connection()

    def _delete_worker_row(self) -> None:
        assert self.pool is not None
        try:
            with self.pool.connection() as conn:
                conn.execute(queries.WAITER_UNREGISTER, {"id": self.worker_id})
                conn.execute(queries.WORKER_DELETE, {"id": self.worker_id})
        except Exception as exc:
            log.debug("could not delete worker row: %s", exc)


def _claims_commit_async(conn: Any) -> None:
    """The claim connection's settings: its commits do not wait for the WAL flush (see Worker.run),
    and the claim's own plan settings (core.claim_session)."""
    conn.execute("SET synchronous_commit = off")
    core.claim_session(conn)


def _listener_session(conn: Any) -> None:
    """The listener connection's settings. It is not pooled, so db.session_defaults does not run on
    it by itself, yet it runs the claim for an idle lane: with JIT on, each of those claims from a
    1,000,000-job backlog compiled for ~2 s (perf: 45% of the machine in libLLVM at a drain's start,
    tests/benchmarks/growth.py's backlog state at 0.29 of the empty table's rate). It connects to
    the session URL, never through a pooler, so its session settings stay its own; the claim's plan
    settings follow the claim connection's (only with prepared statements, as there)."""
    session_defaults(conn)
    if prepared_statements():
        _claims_commit_async(conn)


def _log_fields(job: core.ClaimedJob, outcome: core.Outcome, duration_ms: float) -> dict[str, Any]:
    """The structured fields of a job's log line (JSON logs): built only when a line is written."""
    return {"job_id": job.id, "queue": job.queue, "attempt": job.attempts, "outcome": outcome.status,
            "duration_ms": round(duration_ms, 2)}

