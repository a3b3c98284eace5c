"""The durable jobs' run hook (worker/runtime/run_hooks.py): what a run of a durable job needs around it.

- `caught`: a handler that parked its job (job.sleep / job.wait_for: skiplock_park committed the move to
  parked) raised Park; the run's outcome is PARKED, which has no ack to write: the executor frees the slot.
- `after`: a run that ended otherwise writes the cursors it saved since the last write, fenced, before its
  outcome is acked (the ack ends the fence they need): a retry resumes from them. A job that never saved a
  cursor costs one dict lookup.
It sits nearest the handler, so its `after` runs before every other hook's. The heartbeat and the shutdown
write the cursors of runs still going (runtime/heartbeat.py, runtime/shutdown.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from skiplock.core import state_changes
from skiplock.core.durable import cursors
from skiplock.core.errors import Park
from skiplock.core.plumbing.db import describe_db_error, is_connection_error
from skiplock.core.status import OutcomeStatus
from skiplock.runtime.run_hooks import RunHook

log = logging.getLogger("skiplock.worker")

ClaimedJob = state_changes.ClaimedJob
Outcome = state_changes.Outcome


class DurableHook(RunHook):
    """Turns a parked run into its outcome, and writes a finished run's cursors before its ack."""

    def __init__(self, worker_id: str, connect: Callable[[], AbstractContextManager[psycopg.Connection[Any]]]) -> None:
        self.worker_id = worker_id
        self._connect = connect  # the producer's pool: the handlers' own steps use it too

    def caught(self, job: ClaimedJob, exc: BaseException) -> Outcome | None:
        if isinstance(exc, Park):
            return Outcome(job.id, job.queue, job.attempts, OutcomeStatus.PARKED)
        if isinstance(exc, cursors.RunReleased):
            # the graceful stop released the job (attempt given back, cursors written): no ack either
            return Outcome(job.id, job.queue, job.attempts, OutcomeStatus.PARKED, error="released at shutdown")
        return None

    def after(self, job: ClaimedJob, outcome: Outcome, seconds: float, exc: BaseException | None) -> Outcome:
        if outcome.status == OutcomeStatus.PARKED:
            cursors.forget(self.worker_id, job.id)  # skiplock_park wrote them
            return outcome
        if not cursors.pending_for(self.worker_id, job.id):
            return outcome
        try:
            with self._connect() as conn:
                cursors.flush(conn, self.worker_id, [job.id])
        except Exception as err:  # a lost write costs the retry some redone items, never the outcome
            reason = describe_db_error(err) if is_connection_error(err) else str(err)
            log.warning("job %d: its cursors were not written (%s)", job.id, reason)
        return outcome
