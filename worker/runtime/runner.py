"""The worker process: the wiring of its parts (each part's module says what it does).

Threads, and what each one owns:
- main thread: the claim loop (worker/runtime/claimer.py). Claims up to the number of free slots in
  one statement, hands jobs to the executor, then sleeps until a NOTIFY, a freed slot or the poll interval.
- handler pool (`concurrency` threads, worker/runtime/executor.py): runs handlers; no transaction is
  open meanwhile. The executor classifies each run's outcome and hands it to the acker.
- async loop (worker/runtime/async_pool.py, only when some queue has an `async def` handler): awaits
  those handlers, `async_concurrency` at once. Each kind has its own slots (worker/runtime/lanes.py).
- batch runners (worker/runtime/batch_runner.py, one per queue whose handler takes a batch): gather
  that queue's claimed jobs and call its handler with up to batch_size of them at once.
- acker (worker/runtime/acker.py): gathers outcomes and writes each batch with one fenced
  statement; on a lost connection it keeps them and retries, so finished work is never forgotten.
- heartbeat (worker/runtime/heartbeat.py): extends the leases of running and not-yet-acked jobs.
Both work over the held-jobs ledger (worker/runtime/ledger.py); the Worker wires them.
- listener (built by the claimer): LISTEN/NOTIFY wake-ups, the claim for an idle lane, hand-offs.
  APScheduler: reaper, worker registry, recurring, pruner, the durable jobs' wake pass.
Before the first claim, worker/runtime/startup.py settles the queues and their leases, waits for a
migrated database and writes the tasks' limits.
At a stop, worker/runtime/shutdown.py lets running handlers finish, acks, and releases the rest.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import socket
import threading
import uuid
from collections.abc import Callable
from typing import Any

from psycopg_pool import ConnectionPool

from skiplock.core import state_changes
from skiplock.core.features import worker_rows
from skiplock.core.features.run_times import RunTimeRecorder
from skiplock.core.features.waiting import Waiting
from skiplock.core.features.worker_control import WorkerCommand
from skiplock.core.plumbing.config import Settings
from skiplock.core.plumbing.db import describe_db_error, make_pool, session_settings
from skiplock.core.producer import default_pool
from skiplock.core.registry import REGISTRY, Registry, Task
from skiplock.core.status import HistoryMode
from skiplock.core.task_options import FILL_IN_SECONDS
from skiplock.monitor.alert_rules import AlertSettings
from skiplock.runtime.async_pool import AsyncHandlerLoop
from skiplock.runtime.claimer import LOST_HANDOFF_CHECK_SECONDS, Claimer, claims_commit_async
from skiplock.runtime.durable_hook import DurableHook
from skiplock.runtime.executor import Executor
from skiplock.runtime.flow import WorkerFlow
from skiplock.runtime.heartbeat import Heartbeat
from skiplock.runtime.job_logs import JobLogsHook
from skiplock.runtime.job_stacks import StackHook
from skiplock.runtime.lanes import build_lanes
from skiplock.runtime.latency import LatencyRecorder, fold_exited
from skiplock.runtime.ledger import Counters, HeldJobs
from skiplock.runtime.listener import Listener
from skiplock.runtime.outcomes import MAX_ERROR_CHARS, format_error  # noqa: F401  (re-exported: older imports)
from skiplock.runtime.parts import WorkerParts
from skiplock.runtime.run_hooks import standard_hooks
from skiplock.runtime.shutdown import Shutdown
from skiplock.runtime.startup import check_schema, lease_for, resolve_queues, start_flow
from skiplock.services.alerts import AlertService
from skiplock.services.durable_waker import WAKE_SECONDS, DurableWaker, ParkedSweeper
from skiplock.services.maintenance import add_service, build_scheduler
from skiplock.services.pruner import Pruner
from skiplock.services.reaper import Reaper
from skiplock.services.recurring_defs import DEFINITIONS
from skiplock.services.recurring_service import POLL_SECONDS, PRUNE_SECONDS, RecurringService, WakeTimers
from skiplock.services.vacuum import VACUUM_CHECK_SECONDS, JobsVacuum
from skiplock.services.workflow_sweeper import WorkflowSweeper

log = logging.getLogger("skiplock.worker")

WORKER_ROW_SECONDS = 5.0


def make_worker_id() -> str:
    """host:pid:random; unique across restarts so a new process never inherits an old fence."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    """One worker process's runtime. `run()` blocks until SIGTERM/SIGINT or `request_stop()`.

    It builds the parts and wires them: the claimer (claims, NOTIFY, hand-offs) starts jobs on the
    executor (handlers with their run hooks, outcomes, acker), and the shutdown ends both. They
    share one WorkerParts: the held-jobs ledger, the Signals, the counters, the row writers' lock.
    """

    def __init__(self, settings: Settings, registry: Registry = REGISTRY,
                 queues: list[str] | None = None) -> None:
        self.settings = settings
        self.url = settings.require_database_url()
        self.registry = registry
        self.queues = resolve_queues(settings, registry, queues)
        self.tasks: dict[str, Task] = {q: t for q in self.queues if (t := registry.get(q)) is not None}
        self._lease_for = functools.partial(lease_for, settings, registry)  # a queue's lease (startup.py)
        self.leases = [self._lease_for(q) for q in self.queues]
        self.flow = WorkerFlow(self.tasks)  # versions, tenant cursor, limited queues (worker/runtime/flow.py)
        self.worker_id = make_worker_id()
        self.counters = Counters()
        self.latency = LatencyRecorder()  # claim/ack/handler histograms, saved with the worker row
        self.run_times = RunTimeRecorder()  # per-queue, per-minute run times for the console, saved likewise
        self.health: Any = None  # skiplock.runtime.health.HealthServer when --health-port is set
        self.pool: ConnectionPool | None = None
        self.claim_pool: ConnectionPool | None = None  # the claim loop's own connection (see run())
        self.rows_pool: ConnectionPool | None = None  # acks, heartbeats and the release (see run())
        # Sync and async queues each have their own slots and claim sizing (how many claimed jobs
        # to hold, and when to claim again; see worker/runtime/prefetch.py), re-planned every turn.
        self.lanes = build_lanes(settings, self.tasks, self.queues, self.leases)
        # what the parts share: the ledger owns the jobs held and the lanes' counts (worker/runtime/parts.py)
        self.parts = WorkerParts(settings, self.worker_id, HeldJobs(self.lanes), self.flow, self._rows_connection,
                                 counters=self.counters, latency=self.latency)
        self.signals = self.parts.signals
        self.held = self.parts.ledger
        # waiter rows ask producers' insert trigger for a NOTIFY while this worker is idle
        self.waiting = Waiting(lambda: self._pool_connection(), self.worker_id, list(self.queues), self.leases,
                               [self.tasks[q].version for q in self.queues])
        # the job's own log lines wrap every other hook, so they include what the user's error hooks log;
        # StackHook next: a stack asked of a run is taken until its very end; the standard hooks; and nearest
        # the handler the durable jobs' (steps on the producer's pool)
        hooks = [StackHook(self.parts.stacks), *standard_hooks(self.flow, self.latency, self.run_times,
                                                               self.held.lane_of),
                 DurableHook(self.worker_id, lambda: default_pool().connection())]
        if settings.job_logs:  # SKIPLOCK_JOB_LOGS=0 leaves handlers' records to the logging configuration alone
            batch_queues = frozenset(q for q, t in self.tasks.items() if t.is_batch)
            hooks.insert(0, JobLogsHook(self.parts.job_logs, batch_queues))
        self.executor = Executor(self.parts, hooks)
        self.shutdown = Shutdown(self.parts, self.executor)
        self.claimer = Claimer(self.parts, self.queues, self.waiting, start_jobs=self.executor.start,
                               claim_connection=self._claim_connection, release=self.shutdown.release)
        self.acker = self.executor.acker
        self.async_loop: AsyncHandlerLoop | None = self.executor.async_loop
        self.heartbeat = Heartbeat(self.parts, self._lease_for, self.async_loop)
        self.scheduler = build_scheduler()
        self.reaper: Reaper | None = None
        self._threads: list[threading.Thread] = []

    @property
    def app_name(self) -> str:
        return f"skiplock-worker {self.worker_id.rsplit(':', 1)[-1]}"

    # ---- public controls ------------------------------------------------------------------

    def wake(self) -> None:
        """Make the claim loop look for work now."""
        self.signals.wake.set()

    def request_stop(self) -> None:
        """Begin a graceful shutdown (what SIGTERM/SIGINT do); a second call skips the grace."""
        if self.signals.stop.is_set():
            self.signals.stopped_claiming.set()
            self.signals.skip_grace = True
        self.signals.stop.set()
        self.signals.wake.set()

    @property
    def stopping(self) -> bool:
        """True once a graceful shutdown has begun (the health endpoint then answers 503)."""
        return self.signals.stop.is_set()

    @property
    def loop_tick(self) -> float:
        """time.monotonic() of the claim loop's last turn, for the health endpoint."""
        return self.claimer.loop_tick

    @loop_tick.setter
    def loop_tick(self, value: float) -> None:
        self.claimer.loop_tick = value

    @property
    def listener(self) -> Listener | None:
        return self.claimer.listener

    def in_flight_ids(self) -> list[int]:
        return self.held.running_ids()

    # ---- main ------------------------------------------------------------------------------

    def run(self, install_signals: bool = True, exit_hard: bool = False) -> int:
        """Work until stopped; return the process exit code (0 after a clean shutdown).

        `exit_hard` (the CLI) ends the process with os._exit once released jobs are handed back,
        because their handler threads may still be running and must not hold the process open.
        """
        self.shutdown.exit_hard = exit_hard
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.request_stop())
        # The pool's connections (SKIPLOCK_POOL_SIZE, at least 3): one is the row writers' (below),
        # the rest serve the reaper, the worker registry and the other services.
        self.pool = make_pool(self.url, self.app_name, size=max(self.settings.pool_size, 3) - 1)
        check_schema(self.settings, self.pool, self.app_name, self.worker_id)
        start_flow(self.pool, self.flow)
        # The claim loop's own connection, whose claims commit without waiting for their WAL flush:
        # a claim lost in a server crash puts its jobs back to queued, where they run again, as
        # at-least-once allows for anything in flight at a crash; the flush of the next durable
        # commit (an ack, an enqueue) writes it anyway. The flush was most of an idle pickup's claim
        # (alternating runs with and without it).
        # Like every pooled connection it runs with JIT off (db.session_defaults), and without bitmap
        # scans (state_changes.claim_session). Behind PgBouncer in transaction mode a session setting would leak
        # to other clients' transactions, so there (db.session_settings) claims stay synchronous and
        # JIT is the server's (README "Latency against load").
        self.claim_pool = make_pool(self.url, self.app_name, size=1,
                                    configure=claims_commit_async)
        # The ack, the heartbeat and the shutdown release run one at a time (_row_writes), on one
        # connection of their own: every statement on it names rows by id, so it is planned once
        # and without sequential scans (state_changes.row_writes_session). Behind PgBouncer in transaction
        # mode no session setting is made (db.session_settings), so there each ack is planned for
        # its own values, as every statement is (and with prepared statements off, nothing is prepared).
        self.rows_pool = make_pool(self.url, self.app_name, size=1,
                                   configure=state_changes.row_writes_session)
        self.reaper = Reaper(self.pool)
        log.info("worker %s starting: queues=%s concurrency=%d async_concurrency=%s batch=%d", self.worker_id,
                 ",".join(self.queues), self.settings.concurrency,
                 self.settings.async_concurrency if self.async_loop else "-", self.settings.batch_size)
        # The worker row before the first claim: a job it claims is then never shown as held by a worker
        # with no row ("why is it not running" called a just-started worker silent). The registry service
        # below refreshes it from then on, and retries a first write that failed.
        try:
            self._refresh_worker_row()
        except Exception as exc:
            log.warning("worker row not written at start (%s); the registry retries it", describe_db_error(exc))
        self._start_threads()
        try:
            self.claimer.run()
        finally:
            self.shutdown.run(self)
        return self.signals.exit_code  # ENVIRONMENT_EXIT_CODE after a broken environment (executor.py)

    def _start_threads(self) -> None:
        self.claimer.new_listener(self.wake).start()
        done = self.signals.acker_done
        for target, args, name in ((self.acker.run, (done,), "skiplock-acker"),
                                   (self.heartbeat.run, (self.settings.effective_heartbeat, done),
                                    "skiplock-heartbeat")):
            thread = threading.Thread(target=target, args=args, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        self.executor.start_handlers()
        self._start_services()
        self.scheduler.start()

    def _start_services(self) -> None:
        """Every service on the worker's scheduler, in one list: nothing registers itself on import."""
        assert self.pool is not None and self.reaper is not None
        pool = self.pool
        if self.settings.health_port:
            from skiplock.runtime.health import HealthServer

            self.health = HealthServer(self, self.settings.health_port)
            self.health.start()

        def fill_in_options() -> None:  # jobs a producer marked after this worker started
            with pool.connection() as conn:
                self.flow.fill_in_options(conn)

        def fold() -> None:  # latency rows of workers gone for an hour become one 'exited' row
            with pool.connection() as conn:
                fold_exited(conn)

        recurring = RecurringService(pool, DEFINITIONS.values(), self.registry.queues(),
                                     timers=WakeTimers(self.scheduler, wake=self.wake, wake_queues=self.queues))
        services: list[tuple[str, Callable[[], Any], float]] = [
            ("reaper", self.reaper.run_once, self.settings.reaper_interval),
            ("vacuum", JobsVacuum(pool, self.settings.vacuum_dead_rows, advisory_lock=session_settings()).run_once,
             VACUUM_CHECK_SECONDS),
            ("worker-registry", self._refresh_worker_row, WORKER_ROW_SECONDS),
            ("task-options", fill_in_options, FILL_IN_SECONDS),
            ("latency-fold", fold, 600.0),
            ("recurring", recurring.tick, POLL_SECONDS),  # recurring slots, enqueued once each
            ("pruner", Pruner(pool, self.settings).run_once, PRUNE_SECONDS),
            ("lost-handoffs", self.claimer.release_lost_handoffs, LOST_HANDOFF_CHECK_SECONDS),
            ("recurring-slots-prune", recurring.prune_slots, PRUNE_SECONDS),
            # dependents and batches the normal path could not settle (a job finished outside skiplock)
            ("workflow-sweeper", WorkflowSweeper(pool).run_once, self.settings.sweep_interval),
            # parked durable jobs whose sleep or wait timeout ended go back to their queues
            ("durable-waker", DurableWaker(pool).run_once, WAKE_SECONDS),
            ("parked-sweeper", ParkedSweeper(pool).run_once, self.settings.sweep_interval),
        ]
        alerts = AlertSettings.from_env()
        if alerts.enabled:  # pushed alerts: whichever worker holds the alert lock sends them
            services.append(("alerts", AlertService(pool.connection, self.settings, alerts).run_once, alerts.interval))
        if self.settings.history == HistoryMode.PARTITIONED:
            from skiplock.services.history import HistoryPartitions

            services.append(("history-partitions", HistoryPartitions(pool, self.settings.history_retention).run_once,
                             3600.0))
        for name, run_once, every_seconds in services:
            add_service(self.scheduler, name, run_once, every_seconds)

    # ---- the worker row ------------------------------------------------------------------------

    def _refresh_worker_row(self) -> None:
        assert self.pool is not None
        with self.pool.connection() as conn:
            ordered = worker_rows.heartbeat(
                conn, self.worker_id, host=socket.gethostname(), pid=os.getpid(), queues=self.queues,
                # slots of both kinds this worker runs (threads and async), for the console's gauges
                concurrency=sum(lane.slots for lane in self.lanes), in_flight=len(self.held.running_ids()),
                task_versions=self.flow.versions())
            self.latency.save(conn, self.worker_id)
            self.run_times.save(conn, self.worker_id)
        if ordered:
            self._obey(*ordered)

    def _obey(self, command: str, who: str) -> None:
        """An operator's command from the console (worker/core/features/worker_control.py), read with the heartbeat."""
        if command == WorkerCommand.QUIET and not self.signals.quiet.is_set():
            log.warning("worker %s quieted by %s: claiming no more jobs; %d running job(s) finish",
                        self.worker_id, who, len(self.held.running_ids()))
            self.signals.quiet.set()
        elif command == WorkerCommand.STOP and not self.signals.stop.is_set():
            log.warning("worker %s stopped by %s: graceful shutdown", self.worker_id, who)
            self.request_stop()

    # ---- connections -----------------------------------------------------------------------------

    def _pool_connection(self) -> Any:
        assert self.pool is not None
        return self.pool.connection()

    def _claim_connection(self) -> Any:
        assert self.claim_pool is not None
        return self.claim_pool.connection()

    def _rows_connection(self) -> Any:
        assert self.rows_pool is not None
        return self.rows_pool.connection()
