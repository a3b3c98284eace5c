"""Unique keys that outlive their job: enqueue(..., unique_key=k, unique_for=seconds).

The seed's jobs_unique_inflight index forgets a key as soon as its job finishes, so a webhook
retried an hour later enqueues the job twice. Here the key is held in unique_keys (migration 037)
until it expires, whatever becomes of the job: a second enqueue within the window returns the
first job's id and writes nothing. The primary key on unique_keys makes racing producers agree
(the loser's INSERT waits for the winner's commit, then finds the key held). The job still carries
unique_key, so the in-flight index goes on collapsing plain `unique_key=` enqueues onto it.
Expired keys are deleted by the pruner through the expiry index; one left behind is taken again.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from datetime import timedelta
from typing import Any

import psycopg

from skiplock.core.errors import EnqueueError
from skiplock.core.sql import queries

Q = queries("unique_keys")
# A window past this is a mistake, not an idempotency period (and stays far inside an interval's range).
MAX_UNIQUE_FOR = 10 * 365 * 86400.0

Execute = Callable[[str, Mapping[str, Any]], list[tuple]]
AsyncExecute = Callable[[str, Mapping[str, Any]], Awaitable[Sequence[Any]]]


def seconds(value: object) -> float:
    """unique_for as seconds: a positive number or timedelta, at most MAX_UNIQUE_FOR."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0 < value <= MAX_UNIQUE_FOR:
        raise EnqueueError(f"unique_for must be a positive number of seconds (or a timedelta) up to "
                           f"{MAX_UNIQUE_FOR:,.0f}, got {value!r}")
    return float(value)


def enqueue(execute: Execute, params: dict[str, Any], window: float) -> int:
    """Insert the job of `params` unless its unique_key is held; the id of the job that holds the key.

    `params` are the one-job INSERT's parameters (with unique_key); `execute` runs a statement on
    the caller's connection (joining its transaction) or on a pooled autocommit one.
    """
    steps = _steps(params, window)
    rows: list[tuple] | None = None
    try:
        while True:
            sql, step_params = steps.send(rows)
            rows = execute(sql, step_params)
    except StopIteration as done:
        return int(done.value)


async def enqueue_async(execute: AsyncExecute, params: dict[str, Any], window: float) -> int:
    """`enqueue` for asyncio: the same statements, each awaited on the caller's async connection."""
    steps = _steps(params, window)
    rows: Sequence[Any] | None = None
    try:
        while True:
            sql, step_params = steps.send(rows)
            rows = await execute(sql, step_params)
    except StopIteration as done:
        return int(done.value)


def _steps(params: dict[str, Any], window: float) -> Generator[tuple[str, dict[str, Any]], Any, int]:
    """The statements of one enqueue with unique_for, each yielded with its parameters and sent back its
    rows, so that the sync and the async producer run one logic with their own I/O."""
    params = {**params, "unique_for": window, "trace_context": params.get("trace_context")}
    while True:
        [(claimed, inserted)] = yield Q.enqueue_unique_for, params
        if claimed is None:
            rows = yield Q.held_job, params
            if rows:
                return int(rows[0][0])
            continue  # the holder expired and was pruned between the two statements: take the key now
        if inserted is not None:
            return int(inserted)
        adopted = yield Q.adopt_inflight, params
        if adopted:
            return int(adopted[0][0])
        # The in-flight job finished between the two statements: its key row still names an unused id.
        # Expire the key this call took (in its own transaction, or committed by it) and take it again,
        # which inserts a job now that the in-flight index is free.
        expired = yield Q.expire_now, params
        assert expired, "the key was taken in this call's transaction or committed by it"


def prune(conn: psycopg.Connection, limit: int) -> int:
    """Delete up to `limit` expired keys; return how many (the pruner calls this in batches)."""
    return conn.execute(Q.prune_expired, {"limit": limit}).rowcount
