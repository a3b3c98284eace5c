"""Scenario 8, event_burst: 100,000 jobs enqueued at once with one bulk INSERT, drained with none lost.

The noop queue writes no effect row (100,000 effect INSERTs would measure the test, not the queue),
so the workers keep history: every completed job stays as a 'succeeded' row, and a job whose row
vanished would count as lost. Duplicates are counted from attempts (a job run twice has attempts 2).
"""

from __future__ import annotations

import time

import pytest

from skiplock import enqueue_many
from tests.fault.books import audit, record
from tests.fault.conftest import FAST_RECOVERY, remaining, stop
from tests.support.helpers import wait_for

JOBS = 100_000
# Big batches for a big burst; per-job INFO lines would be 100,000 log writes per run.
SETTINGS = {**FAST_RECOVERY, "SKIPLOCK_KEEP_HISTORY": "true", "SKIPLOCK_CONCURRENCY": "50",
            "SKIPLOCK_BATCH_SIZE": "500", "SKIPLOCK_ACK_BATCH": "500", "SKIPLOCK_LEASE_SECONDS": "60",
            "SKIPLOCK_LOG_LEVEL": "WARNING"}


@pytest.mark.slow
def test_event_burst(conn, spawn_worker):
    started = time.monotonic()
    ids = enqueue_many(("noop", {"n": i}) for i in range(JOBS))
    enqueue_s = time.monotonic() - started
    assert len(ids) == JOBS

    started = time.monotonic()
    workers = [spawn_worker(**SETTINGS) for _ in range(2)]
    wait_for(lambda: remaining(conn) == 0, timeout=300, interval=0.5, message="the burst to drain")
    drain_s = time.monotonic() - started
    for w in workers:
        assert stop(w, conn) == 0

    books = record(audit(conn, "event_burst", ids, effects=False), enqueue_s=round(enqueue_s, 2),
                   drain_s=round(drain_s, 2), jobs_per_s=round(JOBS / drain_s))
    assert books.lost == 0
    assert books.completed == JOBS
    assert books.duplicated == 0  # no fault injected: every job claimed exactly once
    assert books.dead == books.failed == books.queued == books.running == 0
