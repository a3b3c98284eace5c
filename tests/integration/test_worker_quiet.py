"""A quieted worker claims nothing, on any path: not on its poll, and not on the NOTIFY a producer's
insert sends to a worker that registered as a waiter while it was idle (the listener's claim)."""

from __future__ import annotations

from typing import Any

import psycopg

from skiplock import enqueue
from skiplock.core.features.worker_control import WorkerCommand, command
from tests.support.helpers import scalar, wait_for


def test_an_idle_quieted_worker_claims_nothing_though_enqueues_notify_it(
        db_url: str, conn: Any, spawn_worker: Any) -> None:
    worker = spawn_worker(SKIPLOCK_QUEUES="t1")
    wid = wait_for(lambda: scalar(conn, "SELECT id FROM workers"), timeout=90, message="the worker's row")
    # idle: it registered as a waiter, so each insert into t1 makes the producer send a NOTIFY
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters WHERE worker_id = %s", (wid,)) > 0,
             timeout=30, message="the idle worker to register as a waiter")
    # the console's own mechanism (worker_control.command), read by the worker with its row's heartbeat
    assert command(conn, wid, WorkerCommand.QUIET, "test:quiet", live=60.0)
    wait_for(lambda: "quieted by test:quiet" in worker.log(), timeout=30, message="the worker to quiet")

    with psycopg.connect(db_url, autocommit=True) as listener:
        listener.execute("LISTEN skiplock_jobs")
        # jobs with a lock key: the insert trigger hands none off to a waiting worker (migration 020
        # leaves lock-keyed jobs to a claim), it takes the waiter's token and sends a NOTIFY, on which
        # the worker's listener claims for its idle lane
        ids = [enqueue("t1", {"n": n}, lock_key=f"quiet-{n}") for n in range(5)]
        listener.execute("SELECT 1")  # a round trip: a notification committed before it is delivered by now
        # the worker listens on the same channel: the NOTIFY reached it as it reached us
        assert [n.channel for n in listener.notifies(timeout=5.0, stop_after=1)] == ["skiplock_jobs"]
    # two more row heartbeats: the worker is alive, and still no job was claimed
    seen = scalar(conn, "SELECT last_seen FROM workers WHERE id = %s", (wid,))
    wait_for(lambda: scalar(conn, "SELECT last_seen FROM workers WHERE id = %s", (wid,)) > seen, timeout=30,
             message="a heartbeat")
    seen = scalar(conn, "SELECT last_seen FROM workers WHERE id = %s", (wid,))
    wait_for(lambda: scalar(conn, "SELECT last_seen FROM workers WHERE id = %s", (wid,)) > seen, timeout=30,
             message="another heartbeat")
    assert conn.execute("SELECT status::text, count(*), max(attempts) FROM jobs WHERE id = ANY(%s) GROUP BY 1",
                        (ids,)).fetchall() == [("queued", 5, 0)]
    assert "ok in" not in worker.log()

    # a quiet is lifted by a restart: the quiet worker stops cleanly, and a new one runs the jobs
    assert worker.terminate() == 0
    spawn_worker(SKIPLOCK_QUEUES="t1")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE id = ANY(%s)", (ids,)) == 0, timeout=60,
             message="the jobs to run on a worker that is not quiet")
