"""The operator's transitions, written down once: which action takes a job from which state to which.

The console's job page (its buttons), its queue page (per-row and bulk actions) and its action
routes all read this table. Each action calls the queue core's guarded statement, whose WHERE
repeats the same source states: a job that moved meanwhile is reported as not changed.
tests/integration/test_transitions.py drives every action from every state against PostgreSQL and checks the
table and the SQL guards agree.

A job's *situation* is its status with 'queued' split on run_at, as the queue page's tabs are:
ready, scheduled, running, succeeded, failed, dead. A waiting or parked job's situation is its status: they
are not tabs of the queue page, but their job page offers the actions whose sources name them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg

from skiplock.core import state_changes
from skiplock.core.durable import service as durable_service
from skiplock.core.features import cancel
from skiplock.core.status import JobStatus

READY, SCHEDULED = "ready", "scheduled"  # the two situations of a queued job
SITUATIONS = (READY, SCHEDULED, JobStatus.RUNNING.value, JobStatus.SUCCEEDED.value, JobStatus.FAILED.value,
              JobStatus.DEAD.value)
DELETED = "deleted"  # a transition's result when the job row is gone


def situation(status: str, scheduled: bool) -> str:
    """The situation of a job in `status` (`scheduled`: its run_at is in the future)."""
    if status == JobStatus.QUEUED:
        return SCHEDULED if scheduled else READY
    return str(status)


@dataclass(frozen=True)
class Transition:
    """One operator action: the situations it applies to, what it makes of the job, and its words."""

    action: str
    label: str
    sources: frozenset[str]
    result: str  # the situation (or "deleted") the job ends in
    past: str  # "Job 7 retried."
    refused: str  # "Job 7 was not changed: it is not dead or failed (any more)."
    destructive: bool  # asks for a confirmation even for one job on the queue page
    apply: Callable[[psycopg.Connection, Sequence[int], str], list[int]]  # (conn, ids, actor) -> changed ids


def _release(conn: psycopg.Connection, ids: Sequence[int], actor: str) -> list[int]:
    return [job_id for job_id, _queue, _status in state_changes.release_running(conn, ids, actor)]


def _wake(conn: psycopg.Connection, ids: Sequence[int], actor: str) -> list[int]:
    return durable_service.wake_now(conn, ids)


_FINISHED_BADLY = frozenset({JobStatus.DEAD.value, JobStatus.FAILED.value})
_PARKED = frozenset({JobStatus.PARKED.value})
_RUNNING = frozenset({JobStatus.RUNNING.value})

TRANSITIONS: tuple[Transition, ...] = (
    Transition("retry", "Retry", _FINISHED_BADLY, READY, "retried", "it is not dead or failed",
               False, lambda conn, ids, actor: state_changes.retry_finished(conn, ids)),
    Transition("run-now", "Run now", frozenset({SCHEDULED}), READY, "made ready now",
               "it is not a scheduled queued job", False, lambda conn, ids, actor: state_changes.run_now(conn, ids)),
    # a waiting job (it has parents) is cancelled the same way; its dependents are cancelled with it; and a
    # parked durable job (it holds nothing, so nothing needs to stop)
    Transition("cancel", "Cancel", frozenset({READY, SCHEDULED, JobStatus.WAITING.value, JobStatus.PARKED.value}),
               JobStatus.FAILED.value, "cancelled", "it is not queued or parked", True, state_changes.cancel_queued),
    # a parked durable job runs now: a sleep not yet over, or a wait with no signal, parks it again on its
    # re-run (its stored steps are skipped); "send signal" is by key, not by job (skiplock.signal)
    Transition("wake", "Wake now", _PARKED, READY, "woken: it runs now", "it is not parked", False, _wake),
    Transition("purge", "Purge", _FINISHED_BADLY, DELETED, "purged", "it is not dead or failed",
               True, lambda conn, ids, actor: state_changes.purge_finished(conn, ids)),
    # back to ready at once, or dead when it was the last attempt; the handler itself is not stopped
    # (cancel-running asks a running handler to stop)
    Transition("release", "Release", _RUNNING, READY, "released", "it is not running",
               True, _release),
    # a request the handler sees at its worker's next heartbeat (skiplock.core.features.cancel): the job is
    # still running now, and ends failed "cancelled by <who>" when its handler returns. Its URL,
    # /jobs/<id>/cancel-running, is served by webapp/pages/jobs/cancel.py, which answers with what happened.
    Transition("cancel-running", "Cancel", _RUNNING, JobStatus.RUNNING.value,
               "asked to stop: its handler sees it at the next heartbeat and the job ends failed",
               "it is not running", True, cancel.request_running),
)
BY_ACTION = {t.action: t for t in TRANSITIONS}


def allowed(where: str) -> list[Transition]:
    """The actions an operator may take on a job in situation `where`, in the order pages show them."""
    return [t for t in TRANSITIONS if where in t.sources]
