"""Scenario 10, lease_overrun: a handler outlives its lease with heartbeats disabled.

Worker A (lease 1 s, no heartbeat, one slot) runs an 8 s job (long enough for worker B to start
and claim it while A still runs, even on a loaded machine). Its lease expires, a reaper returns
the job, worker B claims and runs it. When A finishes, its ack names A as the owner and finds B:
the fence refuses it and A drops its result. The job is completed once (by B's ack) and run twice:
at-least-once, never a double completion.
"""

from __future__ import annotations

import pytest

from skiplock import enqueue
from tests.fault.books import audit, record
from tests.fault.conftest import effects, remaining, running_of, stop
from tests.support.helpers import scalar, wait_for


@pytest.mark.slow
def test_lease_overrun(conn, spawn_worker):
    job = enqueue("t1", {"sleep": 8})
    assert job is not None
    a = spawn_worker(SKIPLOCK_LEASE_SECONDS="1", SKIPLOCK_HEARTBEAT_INTERVAL="0", SKIPLOCK_CONCURRENCY="1",
                     SKIPLOCK_REAPER_INTERVAL="0.2")
    wait_for(lambda: running_of(conn, a.pid) == [job], timeout=30, message="A to claim the job")
    b = spawn_worker(SKIPLOCK_REAPER_INTERVAL="0.2", SKIPLOCK_CONCURRENCY="2")
    wait_for(lambda: running_of(conn, b.pid) == [job], timeout=60, message="B to claim the reaped job")
    wait_for(lambda: remaining(conn) == 0 and effects(conn) == 2, timeout=30, message="both runs to end")
    wait_for(lambda: "lease lost before ack, result dropped" in a.log(), timeout=30, message="A's refused ack")
    assert stop(a, conn) == 0 and stop(b, conn) == 0

    runs = conn.execute("SELECT pid, attempt FROM test_effects WHERE job_id = %s ORDER BY attempt", (job,)).fetchall()
    assert runs == [(a.pid, 1), (b.pid, 2)]
    # only B's ack was written: the per-worker stats show one completion, and it is B's
    completions = conn.execute("SELECT worker_id, sum(completed) FROM job_stats GROUP BY worker_id "
                               "HAVING sum(completed) > 0").fetchall()
    assert len(completions) == 1 and f":{b.pid}:" in completions[0][0]
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0
    books = record(audit(conn, "lease_overrun", [job]), stale_acks_refused=1)
    assert books.lost == 0 and books.completed == 1 and books.duplicated == 1
