"""The listener claims for an idle lane on its own connection when a NOTIFY comes (issue 19, pickup).

In process: the worker's Claimer.on_notify on a real connection, and the Listener's handling of a failing
claim; end to end: a real worker process whose listener connection ran the claim.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from skiplock import enqueue
from skiplock.core.plumbing.config import load_settings
from skiplock.core.registry import Registry, Task
from skiplock.runtime.listener import CHANNEL, Listener, ListenerHooks
from skiplock.runtime.runner import Worker
from tests.support.helpers import scalar, wait_for


def _worker(queue: str) -> Worker:
    registry = Registry()
    registry.add(Task(queue, lambda payload: None, wants_job=False))
    return Worker(load_settings(), registry=registry, queues=[queue])  # run() is never called: no threads


def test_a_notify_claims_for_an_idle_lane_only(db_url: str, conn: psycopg.Connection) -> None:
    worker = _worker("lc")
    [lane] = worker.lanes
    first = enqueue("lc", {"n": 1})
    with psycopg.connect(db_url, autocommit=True) as listener_conn:
        assert worker.claimer.on_notify(listener_conn) is True
        assert worker.held.running_ids() == [first] and worker.held.held_in(lane) == 1
        handed = worker.executor.jobs.get_nowait()
        assert handed is not None and handed.id == first  # handed to the handler threads
        assert worker.signals.wake_on_start  # the handler that takes it wakes the claim loop
        assert conn.execute("SELECT status, worker_id FROM jobs WHERE id = %s", (first,)).fetchone() == (
            "running", worker.worker_id)

        second = enqueue("lc", {"n": 2})
        assert worker.claimer.on_notify(listener_conn) is False  # the lane holds a job: the claim loop's turn
        worker.executor.finish(handed, worker.executor.failure_outcome(
            handed, RuntimeError("x"))._replace(status="ok"), 1.0)
        assert worker.held.held_in(lane) == 0
        with lane.claiming:  # the claim loop is claiming for this lane right now
            assert worker.claimer.on_notify(listener_conn) is False
        assert scalar(conn, "SELECT status FROM jobs WHERE id = %s", (second,)) == "queued"
        assert worker.claimer.on_notify(listener_conn) is True
        assert scalar(conn, "SELECT status FROM jobs WHERE id = %s", (second,)) == "running"


def test_a_failing_notify_claim_still_wakes_the_worker_and_the_listener_goes_on(
        db_url: str, conn: psycopg.Connection) -> None:
    wakes: list[int] = []
    woken = threading.Condition()

    def wake() -> None:
        with woken:
            wakes.append(1)
            woken.notify_all()

    def broken_claim(_conn: Any) -> bool:
        raise RuntimeError("a bug in the claim path")

    listener = Listener(db_url, {"lq"}, wake, "skiplock-listener test", ListenerHooks(on_notify=broken_claim))
    listener.start()
    try:
        assert listener.connected.wait(10)
        with woken:  # the wake-up every (re)connection makes
            assert woken.wait_for(lambda: len(wakes) >= 1, 10)
        for expected in (2, 3):  # two NOTIFYs, each still a wake-up: the thread survived the error
            conn.execute(f"NOTIFY {CHANNEL}, 'lq'")

            def arrived(n: int = expected) -> bool:
                return len(wakes) >= n
            with woken:
                assert woken.wait_for(arrived, 10), wakes
        assert listener.reconnects == 0
    finally:
        listener.stop()


def test_an_idle_workers_pickup_is_claimed_on_its_listener_connection(
        db_url: str, conn: psycopg.Connection, spawn_worker: Any) -> None:
    """End to end: after an idle pickup the listener's backend last ran the claim (pg_stat_activity).

    The jobs carry lock keys: a plain job is handed to the idle worker by the producer's insert
    trigger with no claim at all (migration 020, tests/integration/test_handoff.py)."""
    spawn_worker(SKIPLOCK_TASKS="tests.support.handlers", SKIPLOCK_QUEUES="noop")
    listener_query = ("SELECT query FROM pg_stat_activity WHERE datname = current_database() "
                      "AND application_name LIKE 'skiplock-listener%%'")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") > 0, message="the worker waiting")
    seen = []
    for seq in range(5):  # the listener's 5-second health check may run between: then look again
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") > 0, message="the worker waiting")
        enqueue("noop", {"seq": seq}, lock_key=f"key-{seq}")
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, message="the job done")
        seen.append(scalar(conn, listener_query))
        if "skiplock_limit_allowances" in seen[-1]:
            break
    assert any("skiplock_limit_allowances" in q for q in seen), seen


def test_the_listener_connection_never_jit_compiles_the_claim(db_url: str) -> None:
    """The listener's connection is not pooled, so the pools' session defaults never ran on it: its
    claims from a 1,000,000-job backlog JIT-compiled for ~2 s each (perf, tests/benchmarks/growth.py).
    The listener the worker builds sets JIT off, and the claim's plan settings, on its connection."""
    from skiplock.core import state_changes
    from skiplock.core.sql import queries

    worker = _worker("lj")
    listener = worker.claimer.new_listener(worker.wake)
    assert listener.configure is not None
    with psycopg.connect(db_url, autocommit=True) as listener_conn:
        if not scalar(listener_conn, "SELECT pg_jit_available()"):
            pytest.skip("this server has no JIT provider")
        listener.configure(listener_conn)
        assert scalar(listener_conn, "SHOW jit") == "off"
        assert scalar(listener_conn, "SHOW enable_bitmapscan") == "off"  # the claim connection's settings
        assert scalar(listener_conn, "SHOW synchronous_commit") == "off"
        enqueue("lj", {"n": 1})
        params = {"queues": ["lj"], "leases": "{30}", "versions": f"{{{state_changes.ANY_VERSION}}}",
                  "tenant_after": [None],
                  "limit": 5, "worker_id": "explain", "limited": []}
        with listener_conn.transaction(force_rollback=True):
            listener_conn.execute("SET LOCAL jit_above_cost = 0")  # any statement would compile if JIT were on
            plan = "\n".join(r[0] for r in listener_conn.execute(
                "EXPLAIN (ANALYZE) " + queries("jobs_claim").claim_lean_text, params))
        assert "JIT" not in plan, plan
        assert worker.claimer.on_notify(listener_conn) is True  # and the worker's own claim runs on it
