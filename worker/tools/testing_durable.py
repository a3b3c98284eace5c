"""skiplock.testing for durable jobs: the runs drain() makes, and a crash after step N.

`run_durable` (worker/tools/testing.py) drains the queues, then, while jobs are parked on a sleep, ends
their sleeps now (and with `expire_waits`, the timeouts of their waits) and drains again, until nothing
moves: a job that sleeps for three days finishes in one call. `signals` are sent first (a signal that
arrives before its wait is kept, so the wait returns it at once); a test may also call skiplock.signal
between two drain() calls.
`crash_after_steps=N` makes each job's first run die right after its Nth stored step, as a SIGKILL would
(its unwritten cursors lost, its job back in its queue with the attempt counted, as the reaper does it),
so the test sees what a resumed run does.
"""

from __future__ import annotations

from contextlib import nullcontext
from contextvars import ContextVar
from typing import Any

import psycopg

from skiplock.core import state_changes
from skiplock.core.durable import cursors
from skiplock.core.durable.run import DurableRun

CRASHED = "crashed"  # the outcome of a run that run_durable's crash_after_steps ended


class SimulatedCrash(BaseException):
    """The run dies here (crash_after_steps): a BaseException, so the handler's `except Exception` lets it by."""


class CrashPlan:
    def __init__(self, after_steps: int) -> None:
        self.after_steps = after_steps
        self.crashed: set[int] = set()  # each job's first run only


PLAN: ContextVar[CrashPlan | None] = ContextVar("skiplock_testing_crash_plan", default=None)


class _CrashingRun(DurableRun):
    """A run that dies once it has stored `after` steps."""

    def __init__(self, job_id: int, attempt: int, worker_id: str, db: psycopg.Connection, after: int) -> None:
        super().__init__(job_id, attempt, worker_id, lambda: nullcontext(db))
        self._left = after

    def store(self, name: str, result: Any) -> Any:
        value = super().store(name, result)
        self._left -= 1
        if self._left <= 0:
            raise SimulatedCrash(f"simulated crash after step {name!r}")
        return value


def make(db: psycopg.Connection, job: state_changes.ClaimedJob, worker_id: str) -> DurableRun:
    """The durable state of one drained run, on drain's own connection (and its transaction, if any)."""
    plan = PLAN.get()
    if plan is not None and job.id not in plan.crashed:
        plan.crashed.add(job.id)
        if plan.after_steps <= 0:
            raise ValueError("crash_after_steps must be >= 1")
        return _CrashingRun(job.id, job.attempts, worker_id, db, plan.after_steps)
    return DurableRun(job.id, job.attempts, worker_id, lambda: nullcontext(db))


def finish(db: psycopg.Connection, worker_id: str, job: state_changes.ClaimedJob) -> None:
    """A run ended: its saved cursors are written before its outcome, as the worker does."""
    cursors.flush(db, worker_id, [job.id])


def crash(db: psycopg.Connection, worker_id: str, job: state_changes.ClaimedJob) -> None:
    """A simulated crash: unwritten cursors lost, the job back in its queue (or dead on its last attempt)."""
    cursors.forget(worker_id, job.id)
    state_changes.release_running(db, [job.id], "skiplock.testing (simulated crash)")
