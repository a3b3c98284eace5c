"""The moves of parked jobs that no handler makes: the wake pass, an operator's wake, the sweeper's repairs,
the doctor's finders and the pruner's side rows. Each is one statement of core/sql/durable.sql; the worker's
services (services/durable_waker.py, the sweeper, the pruner) and the console call these functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from skiplock.core.sql import queries

Q = queries("durable")


def _notify(conn: psycopg.Connection, queues: Sequence[str]) -> None:
    """Wake the workers of these queues: a wake is an UPDATE, so the insert trigger's NOTIFY never comes,
    and a queue's name on skiplock_jobs makes the listener claim for it at once."""
    if queues:
        conn.execute(Q.notify_queues, {"queues": sorted(set(queues))})


def wake_due(conn: psycopg.Connection, limit: int = 1000) -> dict[str, int]:
    """The wake pass: parked jobs whose time has come -> queued, their queues' workers notified in the
    same transaction. Returns how many woke per queue. `conn` may be autocommit: its own transaction."""
    with conn.transaction():
        woken = {queue: int(n) for queue, n in conn.execute(Q.wake_due, {"limit": limit}).fetchall()}
        _notify(conn, list(woken))
    return woken


def wake_now(conn: psycopg.Connection, ids: Sequence[int]) -> list[int]:
    """Operator ("wake now"): these parked jobs -> queued now; the ids woken (others were not parked)."""
    with conn.transaction():
        rows = conn.execute(Q.wake_now, {"ids": list(ids)}).fetchall()
        _notify(conn, [r[1] for r in rows])
    return [r[0] for r in rows]


def fast_forward(conn: psycopg.Connection, queues: Sequence[str], *, waits: bool = False) -> int:
    """Tests only: end the sleeps (and with `waits`, the wait timeouts) of these queues' parked jobs now and
    wake them; how many woke."""
    with conn.transaction():
        conn.execute(Q.fast_forward, {"queues": list(queues), "waits": waits})
    return sum(wake_due(conn).values())


@dataclass(frozen=True)
class ParkedRepair:
    """What a sweeper pass repaired: parked jobs whose signal had come, and parked jobs with no wait row."""

    signalled: list[int]
    unwaited: list[int]

    @property
    def found(self) -> bool:
        return bool(self.signalled or self.unwaited)


def repair(conn: psycopg.Connection, limit: int = 1000) -> ParkedRepair:
    """The sweeper's pass over parked jobs that nothing would wake otherwise (only a bug could leave one)."""
    with conn.transaction():
        signalled = conn.execute(Q.wake_signalled, {"limit": limit}).fetchall()
        unwaited = conn.execute(Q.wake_unwaited, {"limit": limit}).fetchall()
        _notify(conn, [r[1] for r in (*signalled, *unwaited)])
    return ParkedRepair([r[0] for r in signalled], [r[0] for r in unwaited])


def unwakeable(conn: psycopg.Connection, limit: int = 20) -> tuple[int, list[tuple[int, str, datetime | None]]]:
    """The doctor's finder: (how many, the oldest `limit` of them) parked jobs no timer and no key can wake."""
    count = conn.execute(Q.count_unwakeable).fetchone()
    rows = conn.execute(Q.unwakeable, {"limit": limit}).fetchall()
    return (int(count[0]) if count else 0), [(r[0], r[1], r[2]) for r in rows]


def parked_counts(conn: psycopg.Connection) -> dict[str, int]:
    """Parked jobs per queue (from their wait rows)."""
    return {queue: int(n) for queue, n in conn.execute(Q.parked_counts).fetchall()}


def parked_on(conn: psycopg.Connection, job_id: int) -> dict[str, Any] | None:
    """What job `job_id` is parked on: queue, sleep (name) or key, wake_at (its time or timeout), parked_at."""
    row = conn.execute(Q.parked_on, {"job": job_id}).fetchone()
    if row is None:
        return None
    return {"job_id": row[0], "queue": row[1], "sleep": row[2], "key": row[3], "wake_at": row[4],
            "parked_at": row[5]}


def steps_of(conn: psycopg.Connection, job_id: int) -> list[dict[str, Any]]:
    """A job's stored steps in the order done: name, done_at, attempt, size (bytes of JSON)."""
    return [{"name": r[0], "done_at": r[1], "attempt": r[2], "size": r[3]}
            for r in conn.execute(Q.steps_of, {"job": job_id}).fetchall()]


def cursors_of(conn: psycopg.Connection, job_id: int) -> list[dict[str, Any]]:
    """A job's saved cursors: name, value, saved_at."""
    return [{"name": r[0], "value": r[1], "saved_at": r[2]}
            for r in conn.execute(Q.cursors_of, {"job": job_id}).fetchall()]


def prune(conn: psycopg.Connection, signal_retention: float, limit: int) -> int:
    """Pruner: side rows of up to `limit` jobs that are gone (steps, cursors; wait rows of jobs no longer
    parked), and up to `limit` signals older than `signal_retention` seconds. How many rows went."""
    total = 0
    for statement in (Q.prune_steps, Q.prune_cursors, Q.prune_waits):
        total += conn.execute(statement, {"limit": limit}).rowcount
    total += conn.execute(Q.prune_signals, {"limit": limit, "older_than": signal_retention}).rowcount
    return total
