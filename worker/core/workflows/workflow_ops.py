"""Operator actions on a whole workflow: cancel the rest, retry the dead ones.

A workflow is a root job and every job whose workflow_id names it (jobs enqueued with depends_on
join their first parent's workflow). Each action goes through the core's one transition for it
(state_changes.cancel_queued, cancel.request_cancel, state_changes.retry_finished), so dependents and batches are
settled by the same SQL as a single job's action.
"""

from __future__ import annotations

from typing import NamedTuple

import psycopg

from skiplock.core import state_changes
from skiplock.core.features import cancel
from skiplock.core.sql import queries

WORKFLOWS_SQL = queries("workflows")


class WorkflowCancel(NamedTuple):
    cancelled: int  # queued or waiting jobs that will not run (their dependents with them)
    cancel_requested: int  # running jobs asked to stop


def cancel_rest(conn: psycopg.Connection, workflow_id: int, actor: str) -> WorkflowCancel:
    """Cancel every job of the workflow that has not started, and ask the running ones to stop."""
    unstarted = [r[0] for r in conn.execute(WORKFLOWS_SQL.workflow_unstarted, {"workflow": workflow_id})]
    cancelled = state_changes.cancel_queued(conn, unstarted, actor) if unstarted else []
    running = [r[0] for r in conn.execute(WORKFLOWS_SQL.workflow_running, {"workflow": workflow_id})]
    asked = sum(1 for job_id in running if cancel.request_cancel(conn, job_id, actor).changed)
    return WorkflowCancel(len(cancelled), asked)


def retry_dead(conn: psycopg.Connection, workflow_id: int) -> int:
    """Retry the workflow's jobs that failed on their own; the dependents that ended because of
    them wait again with them (skiplock_reopen). Returns how many were retried."""
    roots = [r[0] for r in conn.execute(WORKFLOWS_SQL.workflow_dead_root_causes, {"workflow": workflow_id})]
    return len(state_changes.retry_finished(conn, roots)) if roots else 0
