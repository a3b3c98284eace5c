"""Batches: jobs enqueued as one group, with a callback once every member is final (`skiplock.batch`).

A member is a linked job (core/linked_insert.py writes it and counts it into its batch in one
statement); the callbacks are enqueued by the statement that finalises the last member (migration
026's skiplock_settle). The design: docs/explanation/workflows-design.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from skiplock.core.errors import EnqueueError
from skiplock.core.linked_insert import insert_linked
from skiplock.core.plumbing import adapters
from skiplock.core.producer import (
    _execute,
    _validate_queue,
    default_pool,
    linked_specs,
    producer_settings,
    queues_of,
    refresh_task_defaults,
    serialize_payload,
)
from skiplock.core.sql import queries

WORKFLOWS_SQL = queries("workflows")


def _callback(name: str, value: object) -> str | None:
    """on_complete / on_success as the JSON the batch row keeps: (queue, payload) or None."""
    if value is None:
        return None
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise EnqueueError(f"{name} must be a (queue, payload) pair, got {value!r}")
    queue, payload = value
    _validate_queue(queue)
    return ('{"queue": ' + serialize_payload(queue, 1024) + ', "payload": '
            + serialize_payload(payload, producer_settings().max_payload_bytes) + "}")


@dataclass(frozen=True)
class BatchInfo:
    """A batch as its members and callbacks see it (`job.batch`) and as `skiplock.batch_status` returns it."""

    id: int
    total: int
    pending: int
    succeeded: int
    dead: int
    cancelled: int
    sealed: bool
    called_back: bool
    complete_job_id: int | None
    success_job_id: int | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> BatchInfo:
        return cls(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7] is not None, row[8], row[9])


class Batch:
    """An open batch: jobs enqueued through it are its members (see `skiplock.batch`)."""

    def __init__(self, batch_id: int, raw: Any) -> None:
        self.id = batch_id
        self._raw = raw

    def enqueue(self, queue: str, payload: Any, *, depends_on: Iterable[int] | None = None,
                on_dependency_failure: str = "dead", **options: Any) -> int:
        """Enqueue one member; the arguments are `skiplock.enqueue`'s (no unique_key)."""
        return self.enqueue_many([{"queue": queue, "payload": payload, "depends_on": depends_on,
                                   "on_dependency_failure": on_dependency_failure, **options}])[0]

    def enqueue_many(self, jobs: Iterable[Mapping[str, Any] | tuple[str, Any]]) -> list[int]:
        """Enqueue many members in one statement; items as for `skiplock.enqueue_many`."""
        jobs = jobs if isinstance(jobs, list) else list(jobs)
        # the @task options of members whose task this process lacks, as skiplock.enqueue_many reads them
        refresh_task_defaults(self._raw, queues_of(jobs))
        specs, parents, policies = linked_specs(jobs)
        if not specs:
            return []
        return insert_linked(partial(_execute, self._raw), specs, parents, policies, batch=self.id)


@contextmanager
def batch(on_complete: tuple[str, Any] | None = None, on_success: tuple[str, Any] | None = None, *,
          conn: Any = None, id: int | None = None) -> Iterator[Batch]:
    """A batch of jobs with callbacks; `with skiplock.batch(...) as b: b.enqueue(...)`.

    `on_complete=(queue, payload)` is enqueued once every member is final (succeeded, dead or
    cancelled); `on_success=(queue, payload)` only when every member succeeded. Each is enqueued
    exactly once, by the statement that finalises the last member. An empty batch calls back when
    the block ends. With `conn=` everything joins that connection's transaction (roll it back and
    nothing is left); without it, the block is one transaction of a pooled connection.
    `id=` re-opens a batch to add members (from a member's handler, say) until it has called back.
    Leaving the block by an exception does not seal the batch (it would never call back): roll the
    transaction back.
    """
    complete_json, success_json = _callback("on_complete", on_complete), _callback("on_success", on_success)
    if id is not None and (complete_json or success_json):
        raise EnqueueError("on_complete/on_success belong to a new batch, not to batch(id=...)")
    if conn is not None:
        raw = adapters.sync_connection(conn)
        yield from _batch_on(raw, id, complete_json, success_json)
        return
    with default_pool().connection() as pooled, pooled.transaction():
        yield from _batch_on(pooled, id, complete_json, success_json)


def _batch_on(raw: Any, batch_id: int | None, complete_json: str | None, success_json: str | None) -> Iterator[Batch]:
    """Open (or re-open) the batch on `raw`, yield it, seal it when the block ends normally."""
    with adapters.tuple_cursor(raw) as cur:
        if batch_id is None:
            cur.execute(WORKFLOWS_SQL.batch_open, {"on_complete": complete_json, "on_success": success_json})
            row = cur.fetchone()
            assert row is not None
            batch_id = int(row[0])
        else:
            cur.execute(WORKFLOWS_SQL.batch_is_open, {"batch": batch_id})
            row = cur.fetchone()
            if row is None or not row[0]:
                raise EnqueueError(f"batch {batch_id} has already called back (or does not exist): "
                                   "it takes no more members")
    yield Batch(batch_id, raw)
    with adapters.tuple_cursor(raw) as cur:
        cur.execute(WORKFLOWS_SQL.batch_seal, {"batch": batch_id})
        cur.fetchall()


def batch_status(batch_id: int, *, conn: Any = None) -> BatchInfo:
    """A batch's counts and callbacks (`skiplock.batch_status`); LookupError if there is no such batch."""
    rows = _execute(None if conn is None else adapters.sync_connection(conn), WORKFLOWS_SQL.batch_by_id,
                    {"batch": batch_id})
    if not rows:
        raise LookupError(f"batch {batch_id} does not exist")
    return BatchInfo.from_row(rows[0])
