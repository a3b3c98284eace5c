"""The executor: runs handlers, classifies their outcomes, and hands them to the acker.

Sync handlers run on `concurrency` handler threads that take jobs from a queue; `async def`
handlers run on the worker's event loop (worker/runtime/async_pool.py). Each run ends in an
Outcome (worker/runtime/outcomes.py): `_call` / `_call_async` build the success, `failure_outcome`
classifies an exception. `finish` logs it, frees the job's slot (waking the claim loop when a
claim is worth making) and puts the outcome to the acker (worker/runtime/acker.py), which writes
it in a batch. `execute(job)` runs one job on the calling thread; tests drive it and `finish`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue as queue_mod
import threading
import time
from collections.abc import Callable
from typing import Any

from skiplock.core import state_changes
from skiplock.core.error_summary import headline
from skiplock.core.features import cancel, hooks
from skiplock.core.features.run_times import RunTimeRecorder
from skiplock.core.job_context import JobContext
from skiplock.core.plumbing import tracing
from skiplock.core.plumbing.config import Settings
from skiplock.core.registry import Task
from skiplock.core.status import OutcomeStatus
from skiplock.runtime import outcomes
from skiplock.runtime.acker import Acker
from skiplock.runtime.async_pool import AsyncHandlerLoop
from skiplock.runtime.environment import broken_environment
from skiplock.runtime.flow import WorkerFlow
from skiplock.runtime.lanes import ASYNC, Lane
from skiplock.runtime.latency import LatencyRecorder
from skiplock.runtime.ledger import Counters, HeldJobs
from skiplock.runtime.signals import Signals

log = logging.getLogger("skiplock.worker")

SUCCESS_LINES_PER_SECOND = 20  # per-job INFO success lines per second before they move to DEBUG
ENVIRONMENT_EXIT_CODE = 3  # a handler found the process not set up (2 is a configuration error at start)


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


class Executor:
    """Runs claimed jobs' handlers and records their outcomes (through the acker it owns)."""

    def __init__(self, settings: Settings, worker_id: str, tasks: dict[str, Task], lanes: list[Lane],
                 signals: Signals, held: HeldJobs, flow: WorkerFlow, counters: Counters,
                 latency: LatencyRecorder, *, rows_connection: Callable[[], Any],
                 row_writes: threading.Lock) -> None:
        self.settings = settings
        self.worker_id = worker_id
        self.tasks = tasks
        self.lanes = lanes
        self.lane_of: dict[str, Lane] = {q: lane for lane in lanes for q in lane.queues}
        self.signals = signals
        self.held = held
        self._lock = held.lock
        self.flow = flow
        self.counters = counters
        self.latency = latency
        self.run_times: RunTimeRecorder | None = None  # per-queue run times (the Worker sets it)
        # Handler threads take jobs from a SimpleQueue: a put/get costs ~3 us of CPU per job,
        # a ThreadPoolExecutor submit (Future, locks, work item) ~15 us, on the hot path.
        self.jobs: queue_mod.SimpleQueue[state_changes.ClaimedJob | None] = queue_mod.SimpleQueue()
        self.handlers: list[threading.Thread] = []
        self.async_loop: AsyncHandlerLoop | None = None
        if any(lane.kind == ASYNC for lane in lanes):
            self.async_loop = AsyncHandlerLoop(settings.async_concurrency, self.execute_async)
        self.acker = Acker(rows_connection, worker_id, held, row_writes, counters, latency,
                           batch=settings.ack_batch, interval=settings.ack_interval,
                           history=settings.history, on_written=self.after_ack)
        self._success_log = SuccessLogBudget(SUCCESS_LINES_PER_SECOND)
        self.given_back: list[int] = []  # jobs whose handler found the environment broken: released at shutdown

    # ---- handing jobs to the handlers ------------------------------------------------------

    def start_handlers(self) -> None:
        """The handler threads of the sync lane (`concurrency` of them), and the async loop."""
        if self.async_loop is not None:
            self.async_loop.start()
        sync_slots = self.settings.concurrency if any(lane.kind != ASYNC for lane in self.lanes) else 0
        for index in range(sync_slots):
            # daemons: a handler still running a released job must not hold the process open
            thread = threading.Thread(target=self._handler_loop, name=f"skiplock-handler_{index}", daemon=True)
            thread.start()
            self.handlers.append(thread)

    def stop_handlers(self) -> None:
        """Idle handler threads end; busy ones are daemons (see start_handlers). The async loop stops."""
        for _ in self.handlers:
            self.jobs.put(None)
        if self.async_loop is not None:
            self.async_loop.stop()

    def start(self, lane: Lane, jobs: list[state_changes.ClaimedJob]) -> None:
        """Hold claimed jobs and hand them to their lane's handlers."""
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
                self.jobs.put(job)

    def _handler_loop(self) -> None:
        signals = self.signals
        while (job := self.jobs.get()) is not None:
            if signals.wake_on_start:  # a job the listener claimed (Claimer.on_notify)
                signals.wake_on_start = False
                signals.wake.set()
            try:
                self.execute(job)
            except Exception:  # a bug in our own bookkeeping: keep the thread, the lease will expire
                log.exception("job %d: internal error after its handler ran", job.id)

    # ---- one job ---------------------------------------------------------------------------

    def execute(self, job: state_changes.ClaimedJob) -> None:
        """Run one job's handler on this thread and record its outcome."""
        task = self.tasks[job.queue]
        tracing.start_run(job.id, job.queue, job.attempts)  # OpenTelemetry run span, when installed
        started = time.perf_counter()
        context: JobContext | None = None
        try:
            payload = self.flow.upgrade(job, json.loads(job.payload))  # claimed as text (see Claimer.claim)
            # the context is built only for handlers that declare `job`: most do not, and it is
            # a frozen dataclass of ten fields, built per job
            context = self._context(job) if task.wants_job else None
            outcome = _call(task, job, payload, context, self.settings.max_result_bytes)
        except BaseException as exc:  # KeyboardInterrupt/SystemExit from a handler are its failure
            if self._stops_for_environment(job, exc):
                return
            outcome = self.failure_outcome(job, exc)
        self._record(job, outcome, started, context)

    async def execute_async(self, job: state_changes.ClaimedJob) -> None:
        """execute for an `async def` handler, awaited on the worker's event loop thread."""
        task = self.tasks[job.queue]
        tracing.start_run(job.id, job.queue, job.attempts)  # per task: tracing keeps it in a ContextVar
        started = time.perf_counter()
        context: JobContext | None = None
        try:
            payload = self.flow.upgrade(job, json.loads(job.payload))
            if task.wants_job:
                context = self._context(job)
            outcome = await _call_async(task, job, payload, context, self.settings.max_result_bytes)
        except asyncio.CancelledError as exc:
            current = asyncio.current_task()
            if cancel.is_requested(job.id):
                # an operator's cancel (the heartbeat saw it and cancelled this task): the run ends,
                # and _record's cancel.override makes it failed "cancelled by <who>"
                if current is not None:
                    current.uncancel()
                outcome = self.failure_outcome(job, exc)
            elif current is not None and current.cancelling():
                # cancelled by the shutdown after its grace: no outcome, the job stays in flight
                # and the shutdown releases it to its queue at once (the attempt does not count)
                raise
            outcome = self.failure_outcome(job, exc)  # the handler's own code raised it
        except BaseException as exc:
            if self._stops_for_environment(job, exc):
                return
            outcome = self.failure_outcome(job, exc)
        self._record(job, outcome, started, context)

    def _stops_for_environment(self, job: state_changes.ClaimedJob, exc: BaseException) -> bool:
        """A handler that failed because this process is not set up (worker/runtime/environment.py):
        not the job's failure. The job goes back to its queue with its attempt given back (the
        shutdown releases `given_back`), and the worker stops and exits ENVIRONMENT_EXIT_CODE with the
        reason, instead of retrying every job for hours."""
        reason = broken_environment(exc)
        if reason is None:
            return False
        tracing.end_run("queued", reason)
        log.critical("job %d queue=%s: its handler failed because the worker's environment is broken (%s); "
                     "stopping this worker, the job goes back to its queue", job.id, job.queue, reason)
        with self._lock:
            if self.held.running.pop(job.id, None) is not None:
                self.lane_of[job.queue].held -= 1
            self.given_back.append(job.id)
            if not self.held.running:
                self.held.idle.notify_all()
        if self.signals.exit_code == 0:
            self.signals.exit_code = ENVIRONMENT_EXIT_CODE
        self.signals.stop.set()  # not Worker.request_stop(): a second broken job must not skip the grace
        self.signals.wake.set()
        return True

    def failure_outcome(self, job: state_changes.ClaimedJob, exc: BaseException) -> state_changes.Outcome:
        """What a handler's exception means for its job (worker/runtime/outcomes.py); the hooks are told."""
        outcome = outcomes.for_exception(job, exc, backoff_base=self.settings.backoff_base,
                                         backoff_cap=self.settings.backoff_cap)
        hooks.failed(job, exc, outcome)  # on_failure/on_dead (worker/core/features/hooks.py); never changes the outcome
        return outcome

    def _record(self, job: state_changes.ClaimedJob, outcome: state_changes.Outcome, started: float,
                context: JobContext | None = None) -> None:
        """Time the handler, then hand its outcome to the acker (unless the handler completed the job
        itself with job.complete(conn) / complete_async(conn))."""
        seconds = time.perf_counter() - started
        outcome = cancel.override(outcome)  # a run asked to stop ends failed "cancelled by <who>"
        # the attempt history (state_changes.record_attempts) lists each failure's duration
        if outcome.status != OutcomeStatus.OK:
            outcome = outcome._replace(duration_ms=round(seconds * 1000, 1))
        tracing.end_run(outcome.status, outcome.error)
        self.latency.observe("handler", seconds)
        if self.run_times is not None:
            self.run_times.observe(job.queue, seconds)
        self.lane_of[job.queue].sizing.observe_handler(seconds)
        duration_ms = seconds * 1000
        # job.complete(conn) already wrote the success in the handler's transaction: no second ack
        self.finish(job, outcome, duration_ms, acked=outcome.status == OutcomeStatus.OK and context is not None
                    and context.completed_in_transaction)

    def _context(self, job: state_changes.ClaimedJob) -> JobContext:
        # claimed with its context columns: a handler that declares `job` makes the claim include them
        assert job.priority is not None and job.run_at is not None
        assert job.created_at is not None and job.started_at is not None
        return JobContext(job.id, job.queue, job.attempts, job.max_attempts, job.priority, job.run_at,
                          job.created_at, job.started_at, job.unique_key, self.worker_id,
                          self.settings.history)

    # ---- recording the outcome ---------------------------------------------------------------

    def finish(self, job: state_changes.ClaimedJob, outcome: state_changes.Outcome, duration_ms: float,
               acked: bool = False) -> None:
        """Log a finished job's outcome, free its slot, and put the outcome to the acker (unless `acked`)."""
        if outcome.status == OutcomeStatus.OK:
            # One INFO line per success until SUCCESS_LINES_PER_SECOND; above that they go to DEBUG
            # and a per-second summary says how many: under load, formatting and the handler lock
            # shared by every thread cost more than the jobs themselves. Failures always log.
            level = self._success_log.level()
            if log.isEnabledFor(level):
                log.log(level, "job %d queue=%s attempt=%d/%d ok in %.1fms", job.id, job.queue, job.attempts,
                        job.max_attempts, duration_ms, extra=_log_fields(job, outcome, duration_ms))
        elif outcome.status == OutcomeStatus.SNOOZED:  # the handler's choice, not a failure (snooze_batch)
            log.info("job %d queue=%s snoozed for %.1fs, attempt not counted", job.id, job.queue, outcome.delay,
                     extra=_log_fields(job, outcome, duration_ms))
        else:
            words: dict[str, str] = {OutcomeStatus.RETRY: f"failed, retry in {outcome.delay:.1f}s",
                                     OutcomeStatus.DEAD: "failed, now dead", OutcomeStatus.FAILED: "discarded"}
            verb = words[outcome.status]
            log.warning("job %d queue=%s attempt=%d/%d %s after %.1fms: %s", job.id, job.queue,
                        job.attempts, job.max_attempts, verb, duration_ms, first_line(outcome.error),
                        extra=_log_fields(job, outcome, duration_ms))
        lane = self.lane_of[job.queue]
        with self._lock:
            if self.held.running.pop(job.id, None) is not None:
                lane.held -= 1
            if not self.held.running:
                self.held.idle.notify_all()
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
        if wake and not self.signals.wake.is_set():
            self.signals.wake.set()

    def after_ack(self, outcomes: list[state_changes.Outcome], keys_freed: bool) -> None:
        """An ack batch is written: its limited queues' slots are free in the database now, so the
        next claim includes them at once (see LIMITED_CLAIM_INTERVAL in worker/runtime/flow.py); and
        a lock key it ended lets that key's next job be claimed, which no NOTIFY would announce (a
        chain of 5 jobs of one key on an idle worker took 4 s, one per poll, before this)."""
        if self.flow.note_finished({outcome.queue for outcome in outcomes}) or keys_freed:
            self.signals.wake.set()


def _call(task: Task, job: state_changes.ClaimedJob, payload: Any, context: JobContext | None,
          max_result_bytes: int) -> state_changes.Outcome:
    """Call a sync handler; what it returns makes its success Outcome (an exception propagates):
    its JSON-serialisable return value is stored with the ack (skiplock.result)."""
    result = task.func(payload, job=context) if context is not None else task.func(payload)
    outcomes.check_result(job, result)
    return outcomes.succeeded(job, result, max_result_bytes)


async def _call_async(task: Task, job: state_changes.ClaimedJob, payload: Any, context: JobContext | None,
                      max_result_bytes: int) -> state_changes.Outcome:
    """Await an `async def` handler; what it returns makes its success Outcome (an exception propagates)."""
    if context is not None:
        result = await task.func(payload, job=context)
    else:
        result = await task.func(payload)
    return outcomes.succeeded(job, result, max_result_bytes)


def _log_fields(job: state_changes.ClaimedJob, outcome: state_changes.Outcome, duration_ms: float) -> dict[str, Any]:
    """The structured fields of a job's log line (JSON logs): built only when a line is written."""
    return {"job_id": job.id, "queue": job.queue, "attempt": job.attempts, "outcome": outcome.status,
            "duration_ms": round(duration_ms, 2)}
