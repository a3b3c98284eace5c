"""The executor: runs handlers with the run hooks around them, classifies their outcomes, and
hands them to the acker.

Sync handlers run on `concurrency` handler threads that take jobs from a queue; `async def`
handlers run on the worker's event loop (worker/runtime/async_pool.py). Both share one body:
`_prepare` (the hooks' `before`), the handler call (`_call` or `await _call_async`), then
`conclude` (the hooks' `after`) or, for an exception, `conclude_failed` (the hooks' `caught`,
then `failure_outcome`'s classification, worker/runtime/outcomes.py). The features around a run
(tracing, timings, payload versions, cancel, error hooks) are hooks (worker/runtime/run_hooks.py):
the executor names none of them. `finish` logs the outcome, frees the job's slot in the ledger
(waking the claim loop when a claim is worth making) and puts the outcome to the acker
(worker/runtime/acker.py). `execute(job)` runs one job on the calling thread; tests drive it.
A batch handler's queue goes to its BatchRunner (worker/runtime/batch_runner.py), which calls the handler
once for many jobs and records each job's outcome through the same `prepare_payload`, `conclude` and
`conclude_failed`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue as queue_mod
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from skiplock.core import state_changes
from skiplock.core.error_summary import headline
from skiplock.core.job_context import JobContext
from skiplock.core.registry import Task
from skiplock.core.status import OutcomeStatus
from skiplock.runtime import outcomes
from skiplock.runtime.acker import Acker
from skiplock.runtime.async_pool import AsyncHandlerLoop
from skiplock.runtime.batch_runner import BatchRunner
from skiplock.runtime.environment import broken_environment
from skiplock.runtime.lanes import ASYNC, BATCH, SYNC, Lane
from skiplock.runtime.parts import WorkerParts
from skiplock.runtime.run_hooks import RunHook, cancellation_is_an_outcome, overrides

log = logging.getLogger("skiplock.worker")
C = TypeVar("C", bound=JobContext)

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
    """Runs claimed jobs' handlers, with the run hooks around each, and records their outcomes
    (through the acker it owns)."""

    def __init__(self, parts: WorkerParts, hooks: Sequence[RunHook] = ()) -> None:
        self.parts = parts
        self.settings = parts.settings
        self.worker_id = parts.worker_id
        self.tasks = parts.flow.tasks
        self.ledger = parts.ledger
        self.signals = parts.signals
        self.flow = parts.flow
        self.counters = parts.counters
        self.hooks = list(hooks)
        # each phase's hooks, the ones that do something in it (run_hooks.py: before in list order,
        # the others in reverse), fixed here so that a run loops over short lists
        self._befores = [h for h in self.hooks if overrides(h, "before")]
        self._catchers = [h for h in reversed(self.hooks) if overrides(h, "caught")]
        self._afters = [h for h in reversed(self.hooks) if overrides(h, "after")]
        # Handler threads take jobs from a SimpleQueue: a put/get is far cheaper on the hot path
        # than a ThreadPoolExecutor submit (a Future, locks and a work item per job).
        self.jobs: queue_mod.SimpleQueue[state_changes.ClaimedJob | None] = queue_mod.SimpleQueue()
        self.handlers: list[threading.Thread] = []
        self.async_loop: AsyncHandlerLoop | None = None
        if any(lane.kind == ASYNC for lane in self.ledger.lanes):
            self.async_loop = AsyncHandlerLoop(self.settings.async_concurrency, self.execute_async)
        # a batch handler's queue: its jobs are gathered into calls on a thread of its own (batch_runner.py)
        self.batch_runners = [BatchRunner(self, self.tasks[lane.queues[0]])
                              for lane in self.ledger.lanes if lane.kind == BATCH]
        self._batch_runner_of = {runner.task.queue: runner for runner in self.batch_runners}
        self.acker = Acker(parts, on_written=self.after_ack)
        self._success_log = SuccessLogBudget(SUCCESS_LINES_PER_SECOND)
        self._history = self.settings.history  # read per run's JobContext: a property, computed once here

    # ---- handing jobs to the handlers ------------------------------------------------------

    def start_handlers(self) -> None:
        """The handler threads of the sync lane (`concurrency` of them), and the async loop."""
        if self.async_loop is not None:
            self.async_loop.start()
        for runner in self.batch_runners:
            runner.start()
        sync_slots = self.settings.concurrency if any(lane.kind == SYNC for lane in self.ledger.lanes) else 0
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
        for runner in self.batch_runners:
            runner.stop()

    def start(self, lane: Lane, jobs: list[state_changes.ClaimedJob]) -> None:
        """Hold claimed jobs (in the ledger) and hand them to their lane's handlers."""
        if not jobs:
            return
        self.ledger.started(lane, jobs)
        if lane.kind == ASYNC:
            assert self.async_loop is not None
            self.async_loop.submit(jobs)  # one thread-safe hand-over per batch
        elif lane.kind == BATCH:
            self._batch_runner_of[lane.queues[0]].add(jobs)
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

    # ---- one job: the same body for both kinds, only the handler call differs ----------------

    def execute(self, job: state_changes.ClaimedJob) -> None:
        """Run one job's handler on this thread and record its outcome."""
        task = self.tasks[job.queue]
        started = time.perf_counter()
        context: JobContext | None = None
        try:
            payload, context = self._prepare(job, task)
            outcome = _call(task, job, payload, context, self.settings.max_result_bytes)
        except BaseException as exc:  # KeyboardInterrupt/SystemExit from a handler are its failure
            self.conclude_failed(job, exc, started)
            return
        self.conclude(job, outcome, started, None, context)

    async def execute_async(self, job: state_changes.ClaimedJob) -> None:
        """execute for an `async def` handler, awaited on the worker's event loop thread."""
        task = self.tasks[job.queue]
        started = time.perf_counter()
        context: JobContext | None = None
        try:
            payload, context = self._prepare(job, task)
            outcome = await _call_async(task, job, payload, context, self.settings.max_result_bytes)
        except asyncio.CancelledError as exc:
            if not cancellation_is_an_outcome(job):
                raise  # the shutdown's cancel: the job stays in flight, and is released at once
            self.conclude_failed(job, exc, started)
            return
        except BaseException as exc:
            self.conclude_failed(job, exc, started)
            return
        self.conclude(job, outcome, started, None, context)

    def _prepare(self, job: state_changes.ClaimedJob, task: Task) -> tuple[Any, JobContext | None]:
        """The handler's payload through the hooks' `before`, and its JobContext when it declares `job`
        (most do not: it is built only for those)."""
        return self.prepare_payload(job), (self.context(job) if task.wants_job else None)

    def runs_keep_context(self, queue: str) -> bool:
        """Whether some hook keeps a run of `queue` in a ContextVar now (RunHook.keeps_run_in_context)."""
        return any(hook.keeps_run_in_context(queue) for hook in self.hooks)

    def prepare_payload(self, job: state_changes.ClaimedJob) -> Any:
        """The job's payload (claimed as text, see Claimer.claim) through the hooks' `before`."""
        payload = json.loads(job.payload)
        for hook in self._befores:
            payload = hook.before(job, payload)
        return payload

    def conclude_failed(self, job: state_changes.ClaimedJob, exc: BaseException, started: float) -> None:
        """The run raised: a hook may claim the exception first; else it is classified, unless it
        says the environment is broken (then the job is given back, with no outcome)."""
        for hook in self._catchers:
            outcome = hook.caught(job, exc)
            if outcome is not None:
                self.conclude(job, outcome, started, exc)
                return
        if self._stops_for_environment(job, exc):
            return
        self.conclude(job, self.failure_outcome(job, exc), started, exc)

    def conclude(self, job: state_changes.ClaimedJob, outcome: state_changes.Outcome, started: float,
                  exc: BaseException | None, context: JobContext | None = None) -> None:
        """The hooks' `after` (which may replace the outcome), then log it and hand it to the acker
        (unless the handler completed the job itself with job.complete(conn) / complete_async(conn))."""
        seconds = time.perf_counter() - started
        for hook in self._afters:
            outcome = hook.after(job, outcome, seconds, exc)
        if outcome.status != OutcomeStatus.OK:
            # the attempt history (state_changes.record_attempts) lists each failure's duration
            outcome = outcome._replace(duration_ms=round(seconds * 1000, 1))
        # job.complete(conn) already wrote the success in the handler's transaction, and a parked run's job
        # was moved by the run itself (skiplock_park): no ack to write
        self.finish(job, outcome, seconds * 1000, acked=outcome.status == OutcomeStatus.PARKED or (
            outcome.status == OutcomeStatus.OK and context is not None and context.completed_in_transaction))

    def _stops_for_environment(self, job: state_changes.ClaimedJob, exc: BaseException) -> bool:
        """A handler that failed because this process is not set up (worker/runtime/environment.py):
        not the job's failure. The job goes back to its queue with its attempt given back (the
        ledger keeps it for the shutdown's release), and the worker stops and exits
        ENVIRONMENT_EXIT_CODE with the reason, instead of retrying every job for hours."""
        reason = broken_environment(exc)
        if reason is None:
            return False
        for hook in self.hooks:
            hook.given_back(job, reason)
        log.critical("job %d queue=%s: its handler failed because the worker's environment is broken (%s); "
                     "stopping this worker, the job goes back to its queue", job.id, job.queue, reason)
        self.ledger.given_back(job)
        if self.signals.exit_code == 0:
            self.signals.exit_code = ENVIRONMENT_EXIT_CODE
        self.signals.stop.set()  # not Worker.request_stop(): a second broken job must not skip the grace
        self.signals.wake.set()
        return True

    def failure_outcome(self, job: state_changes.ClaimedJob, exc: BaseException) -> state_changes.Outcome:
        """What a handler's exception means for its job (worker/runtime/outcomes.py)."""
        return outcomes.for_exception(job, exc, backoff_base=self.settings.backoff_base,
                                      backoff_cap=self.settings.backoff_cap)

    def context(self, job: state_changes.ClaimedJob, kind: type[C] = JobContext) -> C:  # type: ignore[assignment]
        """The job's JobContext (a batch's jobs get the BatchMember kind, core/batch_handlers.py)."""
        # claimed with its context columns: a handler that declares `job` makes the claim include them
        assert job.priority is not None and job.run_at is not None
        assert job.created_at is not None and job.started_at is not None
        return kind(job.id, job.queue, job.attempts, job.max_attempts, job.priority, job.run_at,
                          job.created_at, job.started_at, job.unique_key, self.worker_id,
                          self._history)

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
        elif outcome.status == OutcomeStatus.PARKED:  # job.sleep / job.wait_for (runtime/durable_hook.py)
            log.info("job %d queue=%s parked, attempt not counted", job.id, job.queue,
                     extra=_log_fields(job, outcome, duration_ms))
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
        lane, held = self.ledger.finished(job, written=acked)
        if outcome.status == OutcomeStatus.PARKED:
            self.counters.parked += 1
        elif acked:
            self.counters.succeeded += 1
        capacity, threshold = lane.plan
        free, idle = capacity - held, not held
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
