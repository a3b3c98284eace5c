"""Durable jobs' sleeps, waits and signals with real worker processes (tests/support/durable_handlers.py):
- a sleeping job wakes after its time, within a generous deadline;
- a signal and a wait that race, across 4 worker processes and 2 signalling processes, lose nothing;
- a max_attempts=1 job sleeps and waits several times; WaitTimeout reaches the handler, which catches it;
- a signal sent in a transaction that rolls back wakes nobody; a workflow's dependent of a parked job waits.
"""

from __future__ import annotations

import random
import subprocess
import sys
from datetime import timedelta
from functools import partial

import psycopg
import pytest

import skiplock
from skiplock import enqueue, enqueue_many
from tests.conftest import REPO, worker_env
from tests.fault.conftest import FAST_RECOVERY, stop
from tests.support.helpers import scalar, wait_for

DURABLE = {**FAST_RECOVERY, "SKIPLOCK_TASKS": "tests.support.durable_handlers", "SKIPLOCK_CONCURRENCY": "8",
           "SKIPLOCK_POLL_INTERVAL": "2"}  # a slow poll: a wake must come from the NOTIFY, not from polling


def jobs_left(conn: psycopg.Connection) -> int:
    return int(scalar(conn, "SELECT count(*) FROM jobs"))


def status_of(conn: psycopg.Connection, job_id: int) -> str | None:
    return scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,))


@pytest.mark.slow
def test_a_sleeping_job_wakes_after_its_time_and_soon_after(conn, spawn_worker) -> None:
    ids = enqueue_many([("d_sleep", {"seconds": 2}) for _ in range(20)])
    worker = spawn_worker(**DURABLE)
    wait_for(lambda: jobs_left(conn) == 0, timeout=60, message="every sleeper to wake and finish")
    assert stop(worker, conn) == 0
    rows = conn.execute("""
        SELECT e.job_id, e.at >= (s.result #>> '{}')::timestamptz AS after_its_time,
               e.at - (s.result #>> '{}')::timestamptz AS late
          FROM test_effects e JOIN job_steps s ON s.job_id = e.job_id AND s.name = 'sleep:nap'""").fetchall()
    assert sorted(r[0] for r in rows) == sorted(ids)  # each woke once
    assert all(r[1] for r in rows), rows  # never before its time
    # "within about a second": asserted with a generous deadline, never a tight duration
    assert max(r[2] for r in rows) < timedelta(seconds=10), rows


SIGNALLER = """
import random, sys
import skiplock
keys = sys.argv[1].split(",")
random.Random(int(sys.argv[2])).shuffle(keys)
for key in keys:
    skiplock.signal(key, {"for": key})
"""


@pytest.mark.slow
def test_signals_and_waits_that_race_lose_nothing(conn, db_url, spawn_worker) -> None:
    count = 600
    keys = [f"race-{i}" for i in range(count)]
    ids = enqueue_many([("d_wait", {"key": key}) for key in keys])
    early = keys[0::3]  # a third signalled before any wait: the wait must find the signal
    for key in early:
        assert skiplock.signal(key, {"for": key}) == 0
    late = [key for key in keys if key not in set(early)]
    random.shuffle(late)
    workers = [spawn_worker(**DURABLE) for _ in range(4)]
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'parked'") >= 20, timeout=60,
             message="the first waits to park")
    # the rest from two processes while the four workers are still starting and parking jobs: a signal and
    # a wait race in both orders, across processes
    signallers = [subprocess.Popen([sys.executable, "-c", SIGNALLER, ",".join(late[n::2]), str(n)], cwd=REPO,
                                   env=worker_env(db_url)) for n in range(2)]
    for proc in signallers:
        assert proc.wait(timeout=120) == 0
    wait_for(lambda: jobs_left(conn) == 0, timeout=120, message="every waiting job to get its signal")
    for worker in workers:
        assert stop(worker, conn) == 0
    got = dict(conn.execute("SELECT job_id, payload->'got'->>'for' FROM test_effects").fetchall())
    assert int(scalar(conn, "SELECT count(*) FROM test_effects")) == count  # each job finished once
    assert got == {job_id: key for job_id, key in zip(ids, keys, strict=True)}  # with its own key's payload
    parks = sum(w.log().count(" parked, attempt not counted") for w in workers)
    assert 20 <= parks <= len(late), parks  # the early third never parked


@pytest.mark.slow
def test_a_job_with_one_attempt_sleeps_and_waits_several_times(conn, spawn_worker) -> None:
    skiplock.signal("many-0", "early")  # this one before its wait: returned at once
    job_id = enqueue("d_many", {"rounds": 3, "prefix": "many"}, max_attempts=1)
    worker = spawn_worker(**DURABLE)
    def parked_on(key: str) -> bool:
        return scalar(conn, "SELECT key FROM job_waits WHERE job_id = %s", (job_id,)) == key

    for i in (1, 2):
        wait_for(partial(parked_on, f"many-{i}"), timeout=60, message=f"the job to park on many-{i}")
        assert scalar(conn, "SELECT attempts FROM jobs WHERE id = %s", (job_id,)) == 0  # parked: attempt given back
        assert skiplock.signal(f"many-{i}", i) == 1
    wait_for(lambda: status_of(conn, job_id) is None, timeout=60, message="the job to succeed")
    assert stop(worker, conn) == 0
    assert conn.execute("SELECT payload FROM test_effects WHERE job_id = %s", (job_id,)).fetchall() == [
        ({"done": True},)]
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'dead'") == 0


@pytest.mark.slow
def test_wait_timeout_reaches_the_handler_and_a_rolled_back_signal_wakes_nobody(conn, db_url, spawn_worker) -> None:
    timing_out = enqueue("d_wait", {"key": "never", "timeout": 1})
    waiting = enqueue("d_wait", {"key": "rolled-back"})
    worker = spawn_worker(**DURABLE)
    wait_for(lambda: status_of(conn, waiting) == "parked", timeout=60, message="the waiter to park")
    with psycopg.connect(db_url) as webhook:  # a webhook handler's transaction that fails after the signal
        assert skiplock.signal("rolled-back", {"paid": True}, conn=webhook) == 1
        webhook.rollback()
    wait_for(lambda: status_of(conn, timing_out) is None, timeout=60, message="the timed-out wait to finish")
    assert conn.execute("SELECT payload FROM test_effects WHERE job_id = %s", (timing_out,)).fetchall() == [
        ({"timeout": "never"},)]
    assert status_of(conn, waiting) == "parked"  # the rolled-back signal woke nobody
    assert scalar(conn, "SELECT count(*) FROM job_signals WHERE key = 'rolled-back'") == 0
    assert skiplock.signal("rolled-back", {"paid": True}) == 1
    wait_for(lambda: status_of(conn, waiting) is None, timeout=60, message="the committed signal to wake it")
    assert stop(worker, conn) == 0


@pytest.mark.slow
def test_a_dependent_of_a_parked_job_waits_for_it(conn, spawn_worker) -> None:
    parent = enqueue("d_wait", {"key": "approve"})
    child = enqueue("d_sleep", {"seconds": 0}, depends_on=[parent])
    worker = spawn_worker(**DURABLE)
    wait_for(lambda: status_of(conn, parent) == "parked", timeout=60, message="the parent to park")
    assert status_of(conn, child) == "waiting"  # parked is not final
    assert skiplock.signal("approve", "yes") == 1
    wait_for(lambda: status_of(conn, child) is None, timeout=60, message="the dependent to run after its parent")
    assert stop(worker, conn) == 0
    order = [r[0] for r in conn.execute("SELECT job_id FROM test_effects ORDER BY at")]
    assert order == [parent, child]


@pytest.mark.slow
def test_an_async_handler_steps_and_waits(conn, spawn_worker) -> None:
    job_id = enqueue("d_async", {"key": "async-key"})
    worker = spawn_worker(**DURABLE)
    wait_for(lambda: status_of(conn, job_id) == "parked", timeout=60, message="the async handler to park")
    assert skiplock.signal("async-key", [1, 2]) == 1
    wait_for(lambda: status_of(conn, job_id) is None, timeout=60, message="the async handler to finish")
    assert stop(worker, conn) == 0
    assert conn.execute("SELECT payload FROM test_effects WHERE job_id = %s", (job_id,)).fetchall() == [
        ({"got": [1, 2], "first": "fetched"},)]
