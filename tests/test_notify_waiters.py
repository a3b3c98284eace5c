"""NOTIFY only while a worker waits (migration 014): producers skip the NOTIFY's commit lock when no
worker is idle, and an idle worker is still woken by a plain SQL INSERT.

The worker polls every 60 s here, so a job it runs within the test's deadline was found through the
NOTIFY, not the poll.
"""

from __future__ import annotations

from typing import Any

import psycopg

from tests.helpers import scalar, wait_for


def _notifications_after_insert(db_url: str, conn: Any) -> list[str]:
    """Insert one job with plain SQL while listening; the payloads that arrived for it."""
    with psycopg.connect(db_url, autocommit=True) as listener:
        listener.execute("LISTEN skiplock_jobs")
        conn.execute("INSERT INTO jobs (queue, payload) VALUES ('nobody_serves', '{}')")
        listener.execute("SELECT 1")  # a round trip: a notification committed before it is delivered by now
        return [n.payload for n in listener.notifies(timeout=0.2, stop_after=10)]


def test_no_waiting_worker_means_no_notify(db_url: str, conn: Any) -> None:
    assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 0
    assert _notifications_after_insert(db_url, conn) == []


def test_an_idle_worker_registers_and_a_plain_sql_insert_wakes_it(db_url: str, conn: Any, spawn_worker: Any) -> None:
    worker = spawn_worker(SKIPLOCK_QUEUES="t1,t2", SKIPLOCK_POLL_INTERVAL="60")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") == 2, timeout=60,
             message="the idle worker's waiter rows")
    assert _notifications_after_insert(db_url, conn) == [""]
    for n in range(3):  # each one: woken, runs it, idle again (still registered: no batch was full)
        conn.execute("INSERT INTO jobs (queue, payload) VALUES ('t1', %s)", (psycopg.types.json.Jsonb({"n": n}),))
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 't1'") == 0, timeout=30,
                 message="the NOTIFY to wake the worker (its poll is 60 s)")
    assert scalar(conn, "SELECT count(*) FROM test_effects WHERE queue = 't1'") == 3
    assert worker.terminate() == 0
    assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 0  # a clean stop removes its rows


def test_a_busy_worker_with_a_backlog_stops_asking_for_notifies(db_url: str, conn: Any, spawn_worker: Any) -> None:
    # one slot and batches of one: every claim is full while the backlog lasts
    spawn_worker(SKIPLOCK_QUEUES="t2", SKIPLOCK_POLL_INTERVAL="60", SKIPLOCK_CONCURRENCY="1",
                 SKIPLOCK_BATCH_SIZE="1", SKIPLOCK_PREFETCH="0")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") == 1, timeout=60, message="registered")
    conn.execute("INSERT INTO jobs (queue, payload) SELECT 't2', jsonb_build_object('sleep', 0.2) "
                 "FROM generate_series(1, 20)")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") == 0, timeout=30,
             message="the busy worker to leave the waiters")
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 't2' AND status = 'queued'") > 0
    assert _notifications_after_insert(db_url, conn) == []  # producers now commit without a NOTIFY
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 't2'") == 0, timeout=60,
             message="the backlog to drain")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") == 1, timeout=30,
             message="the idle worker to register again")


def test_a_killed_workers_waiter_rows_are_pruned_by_the_reaper(db_url: str, conn: Any, spawn_worker: Any) -> None:
    dead = spawn_worker(SKIPLOCK_QUEUES="t3", SKIPLOCK_POLL_INTERVAL="60")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") == 1, timeout=60, message="registered")
    dead.kill()
    # make the dead worker's rows old enough to prune (its worker row stops being live after 30 s)
    conn.execute("UPDATE queue_waiters SET since = now() - interval '1 hour'")
    conn.execute("UPDATE workers SET last_seen = now() - interval '1 hour'")
    from skiplock import waiting

    assert waiting.prune_gone(conn) == 1
    assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 0
