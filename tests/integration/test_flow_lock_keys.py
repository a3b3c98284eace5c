"""Per-entity serialization (issue 15): at most one job per lock_key runs, across worker processes.

Real workers (3 processes x 8 slots); every run records its start and end (clock_timestamp) in
flow_runs (tests/support/flow_handlers.py); overlaps are computed from those rows at the end.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from skiplock import enqueue, enqueue_many
from tests.support.flow_handlers import FLOW_RUNS
from tests.support.helpers import race, scalar, wait_for

TASKS = "tests.support.flow_handlers"
KEYS = [f"account:{n}" for n in range(5)]


def _overlaps(conn: psycopg.Connection, queue: str) -> list[tuple[Any, ...]]:
    """Pairs of finished runs of one lock key whose [started, ended] intervals overlap."""
    return conn.execute("""
        SELECT a.job_id, b.job_id, a.lock_key FROM flow_runs a JOIN flow_runs b
          ON a.lock_key = b.lock_key AND a.seq < b.seq AND a.queue = %(q)s AND b.queue = %(q)s
         WHERE a.ended IS NOT NULL AND b.ended IS NOT NULL
           AND a.started < b.ended AND b.started < a.ended""", {"q": queue}).fetchall()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_one_run_per_key_across_workers_and_a_killed_holder_frees_its_key(
        db_url: str, conn: psycopg.Connection, spawn_worker: Callable[..., Any]) -> None:
    conn.execute(FLOW_RUNS)
    rng = random.Random(15)
    jobs: list[dict[str, Any]] = [
        {"queue": "flow_keyed", "payload": {"key": rng.choice(KEYS), "sleep": rng.choice([0, 0.005, 0.01])},
         "lock_key": None} for _ in range(200)]
    for job in jobs:
        job["lock_key"] = job["payload"]["key"]
    jobs += [{"queue": "flow_keyed", "payload": {"sleep": 0.005}} for _ in range(200)]
    rng.shuffle(jobs)
    settings = {"SKIPLOCK_TASKS": TASKS, "SKIPLOCK_QUEUES": "flow_keyed", "SKIPLOCK_CONCURRENCY": "8",
                "SKIPLOCK_LEASE_SECONDS": "2", "SKIPLOCK_REAPER_INTERVAL": "0.2"}
    workers = [spawn_worker(**settings) for _ in range(3)]
    enqueue_many(jobs)
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'flow_keyed'") == 0,
             timeout=120, message="all 400 jobs done")

    assert scalar(conn, "SELECT count(DISTINCT job_id) FROM flow_runs") == 400  # every job ran
    assert _overlaps(conn, "flow_keyed") == []  # no two runs of one key overlapped
    # waiting for a key used up no attempt: every job ran once, on its first attempt
    assert scalar(conn, "SELECT count(*) FROM flow_runs WHERE attempt <> 1") == 0
    assert scalar(conn, "SELECT count(*) FROM flow_runs") == 400
    # and the keyed jobs really were spread over several workers meanwhile
    assert scalar(conn, "SELECT count(DISTINCT pid) FROM flow_runs WHERE lock_key IS NOT NULL") >= 2

    # A worker dies holding a key: its run sleeps long; the key's next jobs must wait for the lease.
    holder = enqueue("flow_keyed", {"key": "account:9", "sleep_first": 60}, lock_key="account:9")
    wait_for(lambda: scalar(conn, "SELECT pid FROM flow_runs WHERE job_id = %s", (holder,)),
             message="the holder's run started")
    followers = [enqueue("flow_keyed", {"key": "account:9"}, lock_key="account:9") for _ in range(5)]
    pid = scalar(conn, "SELECT pid FROM flow_runs WHERE job_id = %s", (holder,))
    victim = next(w for w in workers if w.pid == pid)
    victim.kill()
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'flow_keyed'") == 0,
             timeout=60, message="the key's jobs ran after the lease expired")
    assert scalar(conn, "SELECT count(DISTINCT job_id) FROM flow_runs WHERE job_id = ANY(%s)",
                  (followers,)) == 5
    # the holder itself ran again (attempt 2) once reaped; still no overlap on any key
    assert scalar(conn, "SELECT max(attempt) FROM flow_runs WHERE job_id = %s", (holder,)) == 2
    assert _overlaps(conn, "flow_keyed") == []
    # the followers started only after the holder's lease was reaped, never beside its run
    first_follower = scalar(conn, "SELECT min(started) FROM flow_runs WHERE job_id = ANY(%s)", (followers,))
    holder_start = scalar(conn, "SELECT min(started) FROM flow_runs WHERE job_id = %s", (holder,))
    assert first_follower > holder_start


def test_task_lock_key_function_and_per_key_order(db_url: str, conn: psycopg.Connection) -> None:
    """@task(lock_key=fn) stamps the key at enqueue; one claim takes one job per key, the key's first."""
    import tests.support.flow_handlers  # noqa: F401  (registers flow_derived)
    from skiplock.core import state_changes

    ids = [enqueue("flow_derived", {"account": n % 2}, priority=p) for n, p in enumerate([0, 0, 5, 5, 0])]
    keys = [scalar(conn, "SELECT lock_key FROM jobs WHERE id = %s", (i,)) for i in ids]
    assert keys == ["account:0", "account:1", "account:0", "account:1", "account:0"]
    claimed = state_changes.claim(conn, "w1", ["flow_derived"], [30.0], 10)
    # the highest priority job of each key, and nothing else while those run
    assert sorted(j.id for j in claimed) == sorted([ids[2], ids[3]])
    assert state_changes.claim(conn, "w2", ["flow_derived"], [30.0], 10) == []
    # an unkeyed job beside them is not held back
    free = enqueue("flow_keyed", {})
    assert [j.id for j in state_changes.claim(conn, "w2", ["flow_derived", "flow_keyed"], [30.0, 30.0], 10)] == [free]


def test_concurrent_claims_never_run_one_key_twice(db_url: str, conn: psycopg.Connection) -> None:
    """Many claimers on their own connections, racing on few keys: the unique index never fires at
    the caller (the claim retries a lost race) and one key never has two running rows."""
    from skiplock.core import state_changes

    enqueue_many([{"queue": "flow_keyed", "payload": {}, "lock_key": f"k{n % 3}"} for n in range(300)])

    def claimer(index: int) -> None:
        with psycopg.connect(db_url, autocommit=True) as c:
            for _ in range(60):
                for job in state_changes.claim(c, f"w{index}", ["flow_keyed"], [30.0], 5):
                    c.execute("DELETE FROM jobs WHERE id = %s", (job.id,))

    race(6, claimer)  # no claimer sees an error
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == 0


def test_a_keys_next_job_starts_when_the_one_before_is_acked_not_at_the_next_poll(
        db_url: str, conn: psycopg.Connection, spawn_worker: Callable[..., Any]) -> None:
    # One key's jobs on an idle worker: each becomes claimable only when the one before is acked, and
    # no producer's NOTIFY announces that. The ack wakes the claim loop (Executor.after_ack); before,
    # each of them waited for a poll (5 jobs: 4 s at the default 1 s). With a 60 s poll, a chain
    # that ends within the deadline was woken by its acks.
    conn.execute(FLOW_RUNS)
    spawn_worker(SKIPLOCK_TASKS=TASKS, SKIPLOCK_QUEUES="flow_keyed", SKIPLOCK_POLL_INTERVAL="60")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") == 1, timeout=60, message="the idle worker")
    enqueue_many([{"queue": "flow_keyed", "payload": {"key": "account:7", "n": n}, "lock_key": "account:7"}
                  for n in range(5)])
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'flow_keyed'") == 0,
             timeout=30, message="the key's 5 jobs, one after another (a poll is 60 s)")
    assert scalar(conn, "SELECT count(DISTINCT job_id) FROM flow_runs WHERE lock_key = 'account:7'") == 5
    assert _overlaps(conn, "flow_keyed") == []
