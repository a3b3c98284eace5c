"""What a handler may ask for besides the payload: `job`, a JobContext (declare a parameter named `job`).

Its own module, above the producer and the task table: it completes the run in the handler's transaction,
reads the job's parents, batch and cancel request, and reports progress, so it needs the statements, the
producer's pool and the workflow modules, none of which may import the task table's module back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from skiplock.core import state_changes
from skiplock.core.durable import run as durable_run
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
    # The run's durable state (core/durable/run.py), made on the first durable call: most jobs never make one.
    _durable: list[durable_run.DurableRun] = field(default_factory=list, compare=False, repr=False)

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

    # ---- durable jobs (docs/howto/durable-jobs.md): re-run from the top, what is stored is skipped --------

    @property
    def durable(self) -> durable_run.DurableRun:
        """This run's steps and cursors (read from the database once, on first use)."""
        if not self._durable:
            self._durable.append(durable_run.DurableRun(self.id, self.attempt, self.worker_id,
                                                    lambda: default_pool().connection()))
        return self._durable[0]

    def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `fn(*args, **kwargs)` once for this job and store its JSON-serialisable result under `name`;
        a later run of the job returns the stored result without calling `fn`. The result is stored (one
        fenced round trip) before this returns. A step that raises is not stored."""
        return self.durable.step(name, fn, *args, **kwargs)

    async def step_async(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """step() for async handlers: `fn` may be an `async def` (awaited) or a plain function."""
        return await self.durable.step_async(name, fn, *args, **kwargs)

    def cursor(self, name: str) -> Any:
        """The last value saved for cursor `name` (by this run or an earlier one), or None."""
        return self.durable.cursor(name)

    async def cursor_async(self, name: str) -> Any:
        """cursor() for async handlers (its first read of the job's stored state runs on a thread)."""
        return await asyncio.to_thread(self.durable.cursor, name)

    def save_cursor(self, name: str, value: Any) -> None:
        """Save cursor `name`'s JSON-serialisable value: held in memory (cheap per item), written by the
        worker about once a second, when the job parks, when the run ends and at a graceful shutdown."""
        self.durable.save_cursor(name, value)

    def sleep(self, name: str, seconds: float) -> None:
        """Park this job for `seconds` (its slot, connection and attempt are freed); the handler runs again
        from the top when the time comes, and this call then returns. `name` identifies the sleep."""
        durable_run.unwind(self.durable.sleep_outcome(name, seconds=seconds))

    def sleep_until(self, name: str, when: datetime) -> None:
        """Park this job until `when` (an aware datetime); see sleep()."""
        durable_run.unwind(self.durable.sleep_outcome(name, until=when))

    async def sleep_async(self, name: str, seconds: float) -> None:
        """sleep() for async handlers."""
        outcome = await asyncio.to_thread(lambda: self.durable.sleep_outcome(name, seconds=seconds))
        durable_run.unwind(outcome)

    async def sleep_until_async(self, name: str, when: datetime) -> None:
        """sleep_until() for async handlers."""
        outcome = await asyncio.to_thread(lambda: self.durable.sleep_outcome(name, until=when))
        durable_run.unwind(outcome)

    def wait_for(self, key: str, timeout: float | None = None) -> Any:
        """The payload of `skiplock.signal(key, payload)`: at once if it was sent already, else the job parks
        until it comes and this call returns it on the next run. After `timeout` seconds without it (counted
        from the first wait), skiplock.WaitTimeout is raised here instead."""
        outcome, value = self.durable.wait_outcome(key, timeout)
        return durable_run.answer(key, outcome, value)

    async def wait_for_async(self, key: str, timeout: float | None = None) -> Any:
        """wait_for() for async handlers."""
        outcome, value = await asyncio.to_thread(self.durable.wait_outcome, key, timeout)
        return durable_run.answer(key, outcome, value)

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
