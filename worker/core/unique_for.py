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
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import psycopg

from skiplock.core.errors import EnqueueError
from skiplock.core.sql import queries

Q = queries("unique_keys")
# A window past this is a mistake, not an idempotency period (and stays far inside an interval's range).
MAX_UNIQUE_FOR = 10 * 365 * 86400.0

Execute = Callable[[str, Mapping[str, Any]], list[tuple]]


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
    params = {**params, "unique_for": window, "trace_context": params.get("trace_context")}
    [(claimed, inserted)] = execute(Q.enqueue_unique_for, params)
    if claimed is None:
        rows = execute(Q.held_job, params)
        if rows:
            return int(rows[0][0])
        # the holder expired and was pruned between the two statements: take the key now
        return enqueue(execute, params, window)
    if inserted is not None:
        return int(inserted)
    adopted = execute(Q.adopt_inflight, params)
    if adopted:
        return int(adopted[0][0])
    # the in-flight job finished between the two statements: its key row still names an unused id,
    # so point the key at a job again (this call inserts one now that the in-flight index is free)
    return enqueue_after_release(execute, params)


def enqueue_after_release(execute: Execute, params: dict[str, Any]) -> int:
    """Give the key taken by this call a job of its own (rare: see enqueue)."""
    rows = execute(Q.expire_now, params)
    assert rows, "the key was taken in this call's transaction or committed by it"
    return enqueue(execute, params, params["unique_for"])


def prune(conn: psycopg.Connection, limit: int) -> int:
    """Delete up to `limit` expired keys; return how many (the pruner calls this in batches)."""
    return conn.execute(Q.prune_expired, {"limit": limit}).rowcount
