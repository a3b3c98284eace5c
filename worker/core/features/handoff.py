"""Jobs handed to an idle worker by the producer's insert trigger (migration 020).

An idle worker's listener holds a session advisory lock on a random key and writes that key into
its waiter tokens. A producer that takes a token claims the job it just inserted for that worker
(while the key is held) and sends it in a NOTIFY on HANDOFF_CHANNEL: a line of JSON with the
claim's columns, a newline, then the payload's JSON text. The worker starts it with no claim.

A hand-off can be lost when the listener's connection drops after the producer's check: the job
is then running under this worker's id and nobody runs it. After a reconnect the worker releases
such jobs (`release_lost`), their attempt not counted; failing that the reaper does at lease end.
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection
from datetime import datetime
from typing import Any

import psycopg

from skiplock.core import state_changes
from skiplock.core.state_changes import ClaimedJob

HANDOFF_CHANNEL = "skiplock_handoff"
HANDOFF_LOCK_CLASS = 1936418927  # advisory lock namespace of listener keys ('skho'; migration 020)
# A hand-off's NOTIFY arrives within milliseconds of its commit, if at all: a job of ours still
# unknown to us this long after its hand-off was lost with a listener connection.
LOST_AFTER_SECONDS = 5.0

# A stopping worker deletes its tokens, waiting for a producer that holds one: a job that producer
# handed us is then committed, and found by release_lost.
_AWAIT_TOKEN_TAKERS = "DELETE FROM queue_waiters WHERE worker_id = %(worker_id)s"


def take_listen_key(conn: psycopg.Connection[Any]) -> int:
    """Hold a session advisory lock on a fresh random key on `conn` (the listener's) and return it."""
    while True:
        key = random.randint(-(2**31), 2**31 - 1)
        row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (HANDOFF_LOCK_CLASS, key)).fetchone()
        if row and row[0]:
            return key  # another session holding the same key (1 in 4 billion) would make us draw again


def parse(payload: str) -> tuple[str, ClaimedJob]:
    """(worker id, job) from a hand-off NOTIFY's payload; the job's payload stays JSON text."""
    header, _, body = payload.partition("\n")
    head = json.loads(header)
    return head["worker"], ClaimedJob(
        id=head["id"], queue=head["queue"], payload=body, attempts=head["attempts"],
        max_attempts=head["max_attempts"], version=head["version"], tenant=head["tenant"],
        priority=head["priority"], run_at=_timestamp(head["run_at"]), created_at=_timestamp(head["created_at"]),
        started_at=_timestamp(head["started_at"]), unique_key=head["unique_key"])


def _timestamp(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text is not None else None


def release_lost(conn: psycopg.Connection[Any], worker_id: str, known: Collection[int],
                 age: float = LOST_AFTER_SECONDS) -> list[tuple[int, str]]:
    """Release jobs running under `worker_id` for more than `age` s that it does not know of."""
    return state_changes.release_lost_handoffs(conn, worker_id, known, age)


def release_unreceived(conn: psycopg.Connection[Any], worker_id: str, known: Collection[int],
                       wait_seconds: float) -> list[tuple[int, str]]:
    """A stopping worker whose listener is closed: wait up to `wait_seconds` for producers holding our
    tokens to end, then release every job of ours we do not know of (handed, never received)."""
    try:
        with conn.transaction():
            conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{int(wait_seconds * 1000)}ms",))
            conn.execute(_AWAIT_TOKEN_TAKERS, {"worker_id": worker_id})
    except psycopg.errors.LockNotAvailable:
        pass  # a producer's transaction still runs: a job it hands us waits for the reaper
    return release_lost(conn, worker_id, known, age=0.0)
