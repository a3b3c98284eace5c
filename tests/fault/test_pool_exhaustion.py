"""Scenario 5, pool_exhaustion: far more handler threads than pool connections.

Acks and heartbeats share one connection, the reaper and the worker registry a pool of two (3 in
all, the least SKIPLOCK_POOL_SIZE gives; claims have their own connection) while
32 handlers per process finish jobs. Work must continue and PostgreSQL must report no deadlock.
"""

from __future__ import annotations

import pytest

from skiplock import enqueue_many
from tests.fault.books import audit, record
from tests.fault.conftest import FAST_RECOVERY, remaining, stop
from tests.support.helpers import scalar, wait_for

JOBS = 2000
SETTINGS = {**FAST_RECOVERY, "SKIPLOCK_CONCURRENCY": "32", "SKIPLOCK_POOL_SIZE": "1",
            "SKIPLOCK_BATCH_SIZE": "32", "SKIPLOCK_ACK_BATCH": "4", "SKIPLOCK_HEARTBEAT_INTERVAL": "0.05"}
DEADLOCKS = "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"


@pytest.mark.slow
def test_pool_exhaustion(conn, spawn_worker):
    deadlocks_before = scalar(conn, DEADLOCKS)
    ids = enqueue_many([("t1", {"sleep": 0.005}) for _ in range(JOBS)])
    workers = [spawn_worker(**SETTINGS) for _ in range(2)]
    wait_for(lambda: remaining(conn) == 0, timeout=180, message="the queue to drain through tiny pools")
    for w in workers:
        assert stop(w, conn) == 0
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    deadlocks = scalar(conn, DEADLOCKS) - deadlocks_before
    # the pool size is clamped to 3 by the worker; show what it really had
    pool_timeouts = sum(w.log().count("PoolTimeout") + w.log().count("couldn't get a connection") for w in workers)

    books = record(audit(conn, "pool_exhaustion", ids), concurrency=32, pool_connections=3,
                   deadlocks=deadlocks, pool_timeouts=pool_timeouts)
    assert books.lost == 0
    assert books.completed == JOBS
    assert books.dead == books.failed == books.queued == books.running == 0
    assert books.duplicated == 0  # no crash, no lease lost: every job ran exactly once
    assert deadlocks == 0
