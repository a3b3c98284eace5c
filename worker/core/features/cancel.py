"""Cancelling a running job: the request is a row update; the handler sees it cooperatively.

- `request_cancel` (CLI `skiplock jobs cancel ID`, the console's Cancel on a running job) records
  who asked and when on the job row (migration 012). A queued job is cancelled at once
  (state_changes.cancel_queued); a job that already finished is left alone and the answer says so.
- The worker reads the requests for its running jobs with each heartbeat (one query per beat, not
  per job) into `_requested`; a sync handler sees them as `job.cancel_requested` and returns or
  raises when it likes. Whatever the run then ends with, `override` makes the outcome `failed`
  with "cancelled by <who>".
- A request made before the current run started (e.g. for an earlier run that an operator
  retried) does not cancel it: only requests at or after the run's started_at count.
- Async handlers: the async runner can poll `is_requested(job_id)` and cancel its task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import psycopg

from skiplock.core import state_changes
from skiplock.core.sql import queries
from skiplock.core.status import OutcomeStatus

JOBS_OPERATOR_SQL = queries("jobs_operator")
JOBS_RUNNING_SQL = queries("jobs_running")

_requested: dict[int, str] = {}  # running job id -> who asked; filled by the worker's heartbeat


class CancelResult(NamedTuple):
    changed: bool  # False: nothing was changed (finished, unknown)
    message: str


def request_running(conn: psycopg.Connection, ids: Sequence[int], actor: str) -> list[int]:
    """Operator: ask these running jobs' handlers to stop (the transition table's cancel-running);
    the ids of those that were running. Each job stays running until its handler ends, then fails."""
    return state_changes.request_cancel(conn, ids, actor)


def request_cancel(conn: psycopg.Connection, job_id: int, actor: str) -> CancelResult:
    """Ask for job `job_id` to stop; a queued job is cancelled now; a finished job is left alone."""
    if request_running(conn, [job_id], actor):
        return CancelResult(True, f"job {job_id} is running: cancel requested; its handler sees it at the "
                                  "next heartbeat and the job ends failed")
    if state_changes.cancel_queued(conn, [job_id], actor):
        return CancelResult(True, f"job {job_id} was queued: cancelled, it will not run")
    row = conn.execute(JOBS_OPERATOR_SQL.cancel_job_status, {"id": job_id}).fetchone()
    if row is None:
        return CancelResult(False, f"job {job_id} does not exist (any more): nothing to cancel")
    return CancelResult(False, f"job {job_id} already finished ({row[0]}): nothing changed")


def refresh(conn: psycopg.Connection, running_ids: Sequence[int]) -> None:
    """Read the cancel requests of these running jobs (the worker calls this with each heartbeat)."""
    if not running_ids:
        return
    for job_id, who in conn.execute(JOBS_RUNNING_SQL.cancel_requests, {"ids": list(running_ids)}).fetchall():
        _requested[job_id] = who or "unknown"


def is_requested(job_id: int) -> bool:
    """True once the worker has seen a cancel request for this running job."""
    return job_id in _requested


def override(outcome: state_changes.Outcome) -> state_changes.Outcome:
    """The run's outcome, or `failed` "cancelled by <who>" when a cancel was requested during it."""
    who = _requested.pop(outcome.job_id, None)
    if who is None or outcome.status == OutcomeStatus.PARKED:
        return outcome  # a parked job is no longer this run's: an operator cancels it where it is
    return state_changes.Outcome(outcome.job_id, outcome.queue, outcome.attempt, OutcomeStatus.FAILED,
                                 error=f"cancelled by {who}")
