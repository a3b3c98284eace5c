"""What a handler may ask for besides the payload: `job`, a JobContext (declare a parameter named `job`).

Its own module, above the producer and the task table: it completes the run in the handler's transaction,
reads the job's parents, batch and cancel request, and reports progress, so it needs the statements, the
producer's pool and the workflow modules, none of which may import the task table's module back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from skiplock.core import state_changes
from skiplock.core.errors import Cancelled, JobOwnershipLost
from skiplock.core.features import progress
from skiplock.core.features.cancel import is_requested
from skiplock.core.plumbing import adapters
from skiplock.core.plumbing.config import load_settings
from skiplock.core.producer import default_pool
from skiplock.core.sql import queries
from skiplock.core.workflows.batches import BatchInfo
from skiplock.core.workflows.results import encode_result

WORKFLOWS_SQL = queries("workflows")


@dataclass(frozen=True)
class JobContext:
    """What a handler may ask for besides the payload (declare a parameter named `job`)."""

    id: int
    queue: str
    attempt: int
    max_attempts: int
    priority: int
    run_at: datetime
    created_at: datetime
    started_at: datetime
    unique_key: str | None
    worker_id: str
    # Where a success goes (Settings.history): job.complete() writes what the worker's ack would.
    history: str = "delete"
    # Set by complete()/complete_async() once the fenced completion ran in the handler's
    # transaction: the worker then leaves the job to that transaction and does not ack it again.
    _completed: list[bool] = field(default_factory=list, compare=False, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # parents, read once

    @property
    def completed_in_transaction(self) -> bool:
        """True once complete()/complete_async() finished this run in the handler's own transaction."""
        return bool(self._completed)

    def complete(self, conn: Any, result: Any = None) -> None:
        """Mark this run's job done inside the transaction of `conn`, with the handler's own writes.

        `conn`: a psycopg 3 or psycopg2 connection, an SQLAlchemy Connection, Session or scoped_session
        (Flask-SQLAlchemy's db.session), or a Django connection. The completion is fenced (this worker,
        this attempt, still running): if the run lost the job, JobOwnershipLost is raised and the
        caller's transaction must roll back (a `with conn.transaction()` / `atomic()` /
        `session.begin()` block does that by itself).
        Commit right after: until then the job's row and its job_stats row stay locked.
        """
        text, refused = _result_text(result)
        sql, params = state_changes.complete_statement(self.worker_id, self.id, self.attempt, history=self.history,
                                                       result=text, result_error=refused)
        self._check(adapters.run_sync(conn, sql, params))

    async def complete_async(self, conn: Any, result: Any = None) -> None:
        """complete() for a psycopg AsyncConnection, an asyncpg Connection, or an SQLAlchemy
        AsyncConnection/AsyncSession/async_scoped_session."""
        text, refused = _result_text(result)
        sql, params = state_changes.complete_statement(self.worker_id, self.id, self.attempt, history=self.history,
                                                       result=text, result_error=refused)
        self._check(await adapters.run_async(conn, sql, params))

    def _check(self, rows: Sequence[Any]) -> None:
        if not rows:
            raise JobOwnershipLost(
                f"job {self.id}: attempt {self.attempt} on worker {self.worker_id} no longer owns it "
                "(lease lost); roll this transaction back")
        self._completed.append(True)

    @property
    def cancel_requested(self) -> bool:
        """True once an operator asked to cancel this run (seen at the worker's heartbeat)."""
        return is_requested(self.id)

    # ---- workflows (docs/howto/workflows.md): read lazily, on the producer's pool --------------------

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far this run is (0..1), with an optional message: cheap enough to call per item.

        Shown on the console's Long-runners and returned by skiplock.status(); written by the
        worker's heartbeat about once a second (worker/core/features/progress.py).
        """
        progress.report(self.id, fraction, message)

    @property
    def parent_results(self) -> dict[int, Any]:
        """Each parent's id -> its stored result (None when it returned nothing, or did not succeed)."""
        return {parent: result for parent, _state, result in self._parents()}

    @property
    def parent_states(self) -> dict[int, str]:
        """Each parent's id -> its final state (succeeded, dead, failed): with on_dependency_failure="run"
        a dependent runs after a failed parent too, and can tell."""
        return {parent: state for parent, state, _result in self._parents()}

    def _parents(self) -> list[tuple[int, str, Any]]:
        if not self._cache.get("parents"):
            self._cache["parents"] = _read(WORKFLOWS_SQL.parents_of, {"job": self.id})
        return self._cache["parents"]

    @property
    def batch(self) -> BatchInfo | None:
        """The batch this job belongs to, or calls back for: a BatchInfo (id, total, succeeded, dead,
        cancelled, pending) read now; None when it has none."""
        rows = _read(WORKFLOWS_SQL.batch_of_job, {"job": self.id})
        return BatchInfo.from_row(rows[0]) if rows else None

    def check_cancelled(self) -> None:
        """Raise Cancelled if an operator asked to cancel this run: call it between units of work."""
        if self.cancel_requested:
            raise Cancelled(f"job {self.id}: cancel requested")


def _read(sql: str, params: dict[str, Any]) -> list[Any]:
    """A read for a handler's JobContext, on the producer's pool (DATABASE_URL)."""
    with default_pool().connection() as conn:
        return conn.execute(sql, params).fetchall()


def _result_text(value: Any) -> tuple[str | None, str | None]:
    """complete(conn, result=...)'s value as stored JSON, or why it is not stored (SKIPLOCK_MAX_RESULT_BYTES)."""
    if value is None:
        return None, None
    return encode_result(value, load_settings().max_result_bytes)
