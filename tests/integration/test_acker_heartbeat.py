"""The worker's acker and heartbeat, one pass each (`run_once`), against real PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import psycopg
import pytest

from skiplock import enqueue, enqueue_many
from skiplock.core import state_changes
from skiplock.core.features import cancel
from skiplock.core.state_changes import ClaimedJob, Outcome
from skiplock.runtime.acker import Acker
from skiplock.runtime.heartbeat import Heartbeat
from skiplock.runtime.latency import LatencyRecorder
from skiplock.runtime.ledger import Counters, HeldJobs
from skiplock.services.reaper import Reaper
from tests.support.helpers import scalar

# a port nothing listens on: connecting fails at once, as when the database is down
DOWN_URL = "postgresql://postgres@127.0.0.1:1/skiplock?connect_timeout=2"


class Database:
    """The acker's and heartbeat's `connect`: a real connection, to the test database or to nowhere."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.down = False

    def connect(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        # the context commits on a clean exit, as a pooled connection's does
        return psycopg.connect(DOWN_URL if self.down else self.url)


@pytest.fixture
def database(db_url: str) -> Iterator[Database]:
    yield Database(db_url)


def _claim(url: str, worker_id: str, limit: int, lease: float = 30.0) -> list[ClaimedJob]:
    with psycopg.connect(url, autocommit=True) as c:
        return state_changes.claim(c, worker_id, ["t1"], [lease], limit)


def _acker(database: Database, held: HeldJobs, counters: Counters, batch: int = 10) -> Acker:
    return Acker(database.connect, "w", held, threading.Lock(), counters, LatencyRecorder(),
                 batch=batch, interval=0.01, history="delete")


def test_one_acker_pass_writes_a_batch_of_every_outcome_and_forgets_it(database, conn):
    ids = enqueue_many([("t1", {"n": i}) for i in range(3)])
    jobs = _claim(database.url, "w", 3)
    held, counters = HeldJobs(threading.Lock()), Counters()
    held.unacked.update({j.id: j.queue for j in jobs})
    acker = _acker(database, held, counters)
    assert acker.run_once(first_wait=0.01) is None  # nothing finished yet: nothing written
    acker.put(Outcome(ids[0], "t1", 1, "ok"))
    acker.put(Outcome(ids[1], "t1", 1, "queued", delay=60, error="boom"))
    acker.put(Outcome(ids[2], "t1", 1, "dead", error="gone"))
    assert acker.run_once() is True
    assert dict(conn.execute("SELECT id, status::text FROM jobs").fetchall()) == {ids[1]: "queued", ids[2]: "dead"}
    assert held.unacked == {}
    assert (counters.succeeded, counters.retried, counters.dead, counters.stale_acks) == (1, 1, 1, 0)
    assert not acker.waiting()


def test_the_acker_keeps_a_batch_while_the_database_is_away_and_writes_it_after(database, conn):
    [job_id] = [enqueue("t1", {})]
    [job] = _claim(database.url, "w", 1)
    held, counters = HeldJobs(threading.Lock()), Counters()
    held.unacked[job.id] = job.queue
    acker = _acker(database, held, counters)
    acker.put(Outcome(job_id, "t1", 1, "ok"))
    database.down = True
    assert acker.run_once() is False  # kept, not lost
    assert counters.ack_errors == 1 and held.unacked == {job_id: "t1"}
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)) == "running"
    database.down = False
    assert acker.run_once() is True  # the kept batch, without a new put
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0
    assert counters.succeeded == 1 and held.unacked == {}


def test_a_late_result_of_an_older_run_is_dropped_as_stale(database, conn):
    job_id = enqueue("t1", {})
    _claim(database.url, "w", 1)
    held, counters = HeldJobs(threading.Lock()), Counters()
    acker = _acker(database, held, counters)
    acker.put(Outcome(job_id, "t1", 7, "ok"))  # attempt 7 never ran: the fence refuses it
    assert acker.run_once() is True
    assert counters.stale_acks == 1 and counters.succeeded == 0
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)) == "running"


def test_a_whole_batch_is_written_without_waiting_out_the_interval(database, conn):
    ids = enqueue_many([("t1", {"n": i}) for i in range(2)])
    _claim(database.url, "w", 2)
    held, counters = HeldJobs(threading.Lock()), Counters()
    acker = Acker(database.connect, "w", held, threading.Lock(), counters, LatencyRecorder(),
                  batch=2, interval=3600.0, history="delete")  # an interval the test would never see end
    for job_id in ids:
        acker.put(Outcome(job_id, "t1", 1, "ok"))
    assert acker.run_once() is True
    assert counters.succeeded == 2 and scalar(conn, "SELECT count(*) FROM jobs") == 0


def _heartbeat(database: Database, held: HeldJobs, counters: Counters, lease: float = 600.0) -> Heartbeat:
    return Heartbeat(database.connect, "w", held, threading.Lock(), counters, lambda queue: lease)


def test_one_heartbeat_pass_extends_every_held_lease(database, conn):
    enqueue_many([("t1", {"n": i}) for i in range(3)])
    running, unacked, not_held = _claim(database.url, "w", 3, lease=5.0)
    held, counters = HeldJobs(threading.Lock()), Counters()
    held.running[running.id] = running
    held.unacked[unacked.id] = unacked.queue
    assert _heartbeat(database, held, counters).run_once() == set()
    extended = dict(conn.execute("SELECT id, lease_until > now() + interval '500 seconds' FROM jobs").fetchall())
    assert extended == {running.id: True, unacked.id: True, not_held.id: False}
    assert counters.lost_leases == 0


def test_a_reaped_lease_is_reported_lost_and_a_cancel_request_is_seen(database, conn):
    enqueue_many([("t1", {"n": i}) for i in range(2)])
    kept, reaped = _claim(database.url, "w", 2)
    held, counters = HeldJobs(threading.Lock()), Counters()
    held.running.update({kept.id: kept, reaped.id: reaped})
    conn.execute("UPDATE jobs SET lease_until = now() - interval '1 second' WHERE id = %s", (reaped.id,))
    with psycopg.connect(database.url) as c:
        assert cancel.request_cancel(c, kept.id, "test").changed
    from skiplock.core.plumbing.db import make_pool

    pool = make_pool(database.url, "test-reaper", size=1, open_wait=True)
    try:
        assert Reaper(pool).run_once() == [(reaped.id, "t1", "queued")]
    finally:
        pool.close()
    try:
        assert _heartbeat(database, held, counters).run_once() == {reaped.id}
        assert counters.lost_leases == 1
        assert cancel.is_requested(kept.id) and not cancel.is_requested(reaped.id)
    finally:
        cancel.override(Outcome(kept.id, "t1", 1, "ok"))  # forget the request this process saw


def test_a_heartbeat_without_the_database_loses_nothing(database, conn):
    enqueue("t1", {})
    [job] = _claim(database.url, "w", 1)
    held, counters = HeldJobs(threading.Lock()), Counters()
    held.running[job.id] = job
    database.down = True
    assert _heartbeat(database, held, counters).run_once() == set()
    assert counters.lost_leases == 0 and held.running == {job.id: job}
