"""Batch handlers' runs: a batch queue's claimed jobs gathered into calls of `handle(payloads, jobs)`.

One BatchRunner per batch queue (its own lane, worker/runtime/lanes.py), on a thread of its own. The
executor hands it the lane's claimed jobs (`add`); it waits until batch_size of them are there, or the
oldest has waited batch_wait seconds, then calls the handler once with up to batch_size of them. One
call at a time per queue: the lane claims up to a second batch meanwhile, which is the next call's.

Each job of a batch stays itself. The ledger holds it from its claim to its ack, the heartbeat extends
its lease and reads its cancel request, the shutdown gives it back. The executor's run hooks run for it
as for a run of its own. While a hook keeps runs in a ContextVar (tracing, once a tracer provider is
set), each job's hooks run in a contextvars.Context of its own, so that each sees one job; the job's
log lines are not kept for a batch's jobs (see below), so without tracing no Context is made. Its outcome is its own: a
success, the exception BatchItemsFailed names for it, or the exception that failed the whole call,
classified with its own attempts (worker/runtime/outcomes.py) and recorded by the executor's
`conclude` / `conclude_failed`, as for any run.

What a batch cannot do is refused where it is asked (core/batch_handlers.py BatchMember): durable steps,
sleeps, waits and cursors, and a job completed in the handler's transaction. Lines the handler logs
belong to no one job: they go to the worker's log only.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from skiplock.core import state_changes
from skiplock.core.batch_handlers import BatchMember
from skiplock.core.errors import BatchItemsFailed, SkiplockError
from skiplock.core.plumbing.config import Settings
from skiplock.core.registry import Task
from skiplock.runtime import outcomes

log = logging.getLogger("skiplock.worker")

ClaimedJob = state_changes.ClaimedJob


class BatchReportInvalid(SkiplockError):
    """A batch handler's BatchItemsFailed named jobs that are not in its batch: which of the batch's jobs
    failed is unknown, so they all fail with this error (and retry, each per its own attempts)."""


class RunRecorder(Protocol):
    """What a runner needs of the executor (worker/runtime/executor.py), which builds the runners: the run
    hooks' phases and the recording of an outcome, the same as for a run of one job."""

    settings: Settings

    def runs_keep_context(self, queue: str) -> bool: ...

    def prepare_payload(self, job: ClaimedJob) -> Any: ...

    def context(self, job: ClaimedJob, kind: type[BatchMember]) -> BatchMember: ...

    def conclude(self, job: ClaimedJob, outcome: state_changes.Outcome, started: float,
                 exc: BaseException | None) -> None: ...

    def conclude_failed(self, job: ClaimedJob, exc: BaseException, started: float) -> None: ...


class _SharedScope:
    """In place of a job's own contextvars.Context when no hook keeps its run in one: calls directly."""

    def run(self, func: Callable[..., Any], *args: Any) -> Any:
        return func(*args)


_SHARED = _SharedScope()


class _Member(NamedTuple):
    """One job of the batch being run: its hooks' context, the payload they made, its JobContext."""

    job: ClaimedJob
    scope: contextvars.Context | _SharedScope
    payload: Any
    context: BatchMember


class BatchRunner:
    """Gathers one batch queue's claimed jobs and runs its handler on them, a batch at a time."""

    def __init__(self, executor: RunRecorder, task: Task) -> None:
        assert task.batch_size is not None
        self.executor = executor
        self.task = task
        self.size = task.batch_size
        self._ready = threading.Condition()
        self._waiting: list[tuple[float, ClaimedJob]] = []  # (monotonic arrival, job), oldest first
        self._stopped = False
        # a daemon, as the handler threads: a handler still running a released batch must not hold the
        # process open
        self._thread = threading.Thread(target=self._loop, name=f"skiplock-batch-{task.queue}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """The thread ends once its current batch (if any) has ended; jobs still waiting stay held."""
        with self._ready:
            self._stopped = True
            self._ready.notify()

    def add(self, jobs: list[ClaimedJob]) -> None:
        """Claimed jobs of this queue (already held in the ledger), for the next batches."""
        arrived = time.monotonic()
        with self._ready:
            self._waiting.extend((arrived, job) for job in jobs)
            self._ready.notify()

    def take_waiting(self) -> list[ClaimedJob]:
        """At a stop: the jobs gathered for a batch that has not started (none of their code ran)."""
        with self._ready:
            taken = [job for _, job in self._waiting]
            self._waiting.clear()
        return taken

    def _next_batch(self) -> list[ClaimedJob] | None:
        """Up to batch_size jobs, once that many wait or the oldest has waited batch_wait; None at a stop."""
        with self._ready:
            while not self._stopped:
                if not self._waiting:
                    self._ready.wait()
                    continue
                left = self._waiting[0][0] + self.task.batch_wait - time.monotonic()
                if len(self._waiting) >= self.size or left <= 0:
                    batch = [job for _, job in self._waiting[:self.size]]
                    del self._waiting[:self.size]
                    return batch
                self._ready.wait(left)
            return None

    def _loop(self) -> None:
        while (jobs := self._next_batch()) is not None:
            try:
                self.run(jobs)
            except Exception:  # a bug in our own bookkeeping: keep the thread, the leases will expire
                log.exception("batch of %d job(s) queue=%s: internal error after its handler ran",
                              len(jobs), self.task.queue)

    # ---- one batch ---------------------------------------------------------------------------

    def run(self, jobs: list[ClaimedJob]) -> None:
        """Call the handler once with these jobs and record each one's outcome."""
        executor = self.executor
        started = time.perf_counter()
        members: list[_Member] = []
        own_scopes = executor.runs_keep_context(self.task.queue)  # asked once per batch
        for job in jobs:
            scope = contextvars.copy_context() if own_scopes else _SHARED
            try:
                payload = scope.run(executor.prepare_payload, job)
            except BaseException as exc:  # its payload (or its upgrade) is broken: that job fails alone
                scope.run(executor.conclude_failed, job, exc, started)
                continue
            members.append(_Member(job, scope, payload, executor.context(job, BatchMember)))
        if not members:
            return
        try:
            returned = _call_batch(self.task, [m.payload for m in members], [m.context for m in members])
            outcomes.check_result(members[0].job, returned)  # a coroutine from a plain def is not a success
        except BatchItemsFailed as failed:
            self._conclude_partly(members, failed, started)
            return
        except BaseException as exc:  # the whole call failed: every job with this error, as if alone
            for m in members:
                m.scope.run(executor.conclude_failed, m.job, exc, started)
            return
        results = self._results(returned)
        for m in members:
            self._succeed(m, results.get(m.job.id), started)

    def _conclude_partly(self, members: list[_Member], failed: BatchItemsFailed, started: float) -> None:
        """The jobs BatchItemsFailed names fail with their own exceptions; the others succeed."""
        executor = self.executor
        ids = [m.job.id for m in members]
        strangers = sorted(set(failed.failures) - set(ids))
        if strangers:
            # the report is wrong, so which jobs failed is unknown: none is called a success
            error = BatchReportInvalid(
                f"BatchItemsFailed names job(s) {', '.join(map(str, strangers))} that are not in this batch "
                f"of queue {self.task.queue!r} (its jobs: {', '.join(map(str, ids))}); every job of the "
                "batch fails with this error")
            error.__cause__ = failed
            for m in members:
                m.scope.run(executor.conclude_failed, m.job, error, started)
            return
        for m in members:
            exc = failed.failures.get(m.job.id)
            if exc is None:
                self._succeed(m, None, started)
            else:
                m.scope.run(executor.conclude_failed, m.job, exc, started)

    def _succeed(self, member: _Member, value: Any, started: float) -> None:
        outcome = outcomes.succeeded(member.job, value, self.executor.settings.max_result_bytes)
        member.scope.run(self.executor.conclude, member.job, outcome, started, None)

    def _results(self, returned: Any) -> dict[int, Any]:
        """A batch handler returns None, or {job_id: result} to store results; anything else is not stored."""
        if returned is None:
            return {}
        if isinstance(returned, dict):
            return returned
        log.warning("queue=%s: a batch handler returns None or a dict {job_id: result}, not %s; nothing stored",
                    self.task.queue, type(returned).__name__)
        return {}


def _call_batch(task: Task, payloads: list[Any], jobs: list[BatchMember]) -> Any:
    """Call the batch handler (an `async def` one to its end on a loop of this thread's own; a
    TypeError raised here means it cannot be called at all: outcomes.CALL_SITES)."""
    if task.is_async:
        return asyncio.run(task.func(payloads, jobs))
    return task.func(payloads, jobs)
