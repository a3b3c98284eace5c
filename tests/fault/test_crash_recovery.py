"""Scenario 1, crash_recovery: SIGKILL a worker mid-batch, start a new one, check the books."""

from __future__ import annotations

import time

import pytest

from skiplock import enqueue_many
from tests.fault.books import audit, record
from tests.fault.conftest import FAST_RECOVERY, effects, remaining, running_of, settle_killed, stop
from tests.support.helpers import wait_for

JOBS = 400


@pytest.mark.slow
def test_crash_recovery(conn, spawn_worker):
    ids = enqueue_many([("t1", {"sleep": 0.02, "n": i}) for i in range(JOBS)])
    first = spawn_worker(SKIPLOCK_CONCURRENCY="10", **FAST_RECOVERY)
    wait_for(lambda: effects(conn) >= JOBS // 4, timeout=60, message="the first worker to be mid-drain")

    first.kill()
    killed_at = time.monotonic()
    in_flight = settle_killed(conn, first.pid)  # claimed by the dead process: the only possible duplicates
    assert in_flight, "the kill should land while jobs are claimed"
    done_before = effects(conn)

    second = spawn_worker(SKIPLOCK_CONCURRENCY="10", **FAST_RECOVERY)
    wait_for(lambda: effects(conn) > done_before, timeout=60, message="the new worker to make progress")
    wait_for(lambda: not set(in_flight) & set(running_of(conn, first.pid)), timeout=60,
             message="the reaper to return the dead worker's jobs")
    recovered = time.monotonic() - killed_at
    wait_for(lambda: remaining(conn) == 0, timeout=120, message="the queue to drain")
    assert stop(second, conn) == 0

    books = record(audit(conn, "crash_recovery", ids), in_flight_at_kill=len(in_flight),
                   recovery_s=round(recovered, 2))
    assert books.lost == 0
    assert books.completed == JOBS
    assert books.dead == books.failed == books.queued == books.running == 0
    # only jobs the dead worker held could have run twice (their effect written, their ack lost)
    assert books.duplicated <= len(in_flight)
