"""The worker's acker and heartbeat, one pass each (`run_once`), against real PostgreSQL."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import psycopg
import pytest

from skiplock import enqueue, enqueue_many
from skiplock.core import state_changes
from skiplock.core.features import cancel
from skiplock.core.plumbing.config import load_settings
from skiplock.core.state_changes import ClaimedJob, Outcome
from skiplock.runtime.acker import Acker
from skiplock.runtime.flow import WorkerFlow
from skiplock.runtime.heartbeat import Heartbeat
from skiplock.runtime.lanes import SYNC, Lane
from skiplock.runtime.ledger import Counters, HeldJobs
from skiplock.runtime.parts import WorkerParts
from skiplock.runtime.prefetch import ClaimSizing
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


def _ledger(running: list[ClaimedJob] = [], unacked: list[ClaimedJob] = []) -> HeldJobs:  # noqa: B006
    """A ledger holding `running` jobs and finished `unacked` ones, arranged through its own methods."""
    lane = Lane(SYNC, 4, ["t1"], [30.0], ClaimSizing(4, 10))
    held = HeldJobs([lane])
    held.started(lane, [*running, *unacked])
    for job in unacked:
        held.finished(job, written=False)
    return held


def _parts(database: Database, held: HeldJobs, counters: Counters, batch: int = 10,
           interval: float = 0.01) -> WorkerParts:
    settings = dataclasses.replace(load_settings(), ack_batch=batch, ack_interval=interval, history_mode="delete")
    return WorkerParts(settings, "w", held, WorkerFlow({}), database.connect, counters=counters)


def _acker(database: Database, held: HeldJobs, counters: Counters, batch: int = 10) -> Acker:
    return Acker(_parts(database, held, counters, batch))


def test_one_acker_pass_writes_a_batch_of_every_outcome_and_forgets_it(database, conn):
    ids = enqueue_many([("t1", {"n": i}) for i in range(3)])
    jobs = _claim(database.url, "w", 3)
    held, counters = _ledger(unacked=jobs), Counters()
    acker = _acker(database, held, counters)
    assert acker.run_once(first_wait=0.01) is None  # nothing finished yet: nothing written
    acker.put(Outcome(ids[0], "t1", 1, "ok"))
    acker.put(Outcome(ids[1], "t1", 1, "queued", delay=60, error="boom"))
    acker.put(Outcome(ids[2], "t1", 1, "dead", error="gone"))
    assert acker.run_once() is True
    assert dict(conn.execute("SELECT id, status::text FROM jobs").fetchall()) == {ids[1]: "queued", ids[2]: "dead"}
    assert held.known_ids() == []
    assert (counters.succeeded, counters.retried, counters.dead, counters.stale_acks) == (1, 1, 1, 0)
    assert not acker.waiting()


def test_the_acker_keeps_a_batch_while_the_database_is_away_and_writes_it_after(database, conn):
    [job_id] = [enqueue("t1", {})]
    [job] = _claim(database.url, "w", 1)
    held, counters = _ledger(unacked=[job]), Counters()
    acker = _acker(database, held, counters)
    acker.put(Outcome(job_id, "t1", 1, "ok"))
    database.down = True
    assert acker.run_once() is False  # kept, not lost
    assert counters.ack_errors == 1 and held.leases() == ({job_id: "t1"}, [])
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)) == "running"
    database.down = False
    assert acker.run_once() is True  # the kept batch, without a new put
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0
    assert counters.succeeded == 1 and held.known_ids() == []


def test_a_late_result_of_an_older_run_is_dropped_as_stale(database, conn):
    job_id = enqueue("t1", {})
    _claim(database.url, "w", 1)
    held, counters = _ledger(), Counters()
    acker = _acker(database, held, counters)
    acker.put(Outcome(job_id, "t1", 7, "ok"))  # attempt 7 never ran: the fence refuses it
    assert acker.run_once() is True
    assert counters.stale_acks == 1 and counters.succeeded == 0
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)) == "running"


def test_a_whole_batch_is_written_without_waiting_out_the_interval(database, conn):
    ids = enqueue_many([("t1", {"n": i}) for i in range(2)])
    _claim(database.url, "w", 2)
    held, counters = _ledger(), Counters()
    acker = Acker(_parts(database, held, counters, batch=2, interval=3600.0))  # an interval no test sees end
    for job_id in ids:
        acker.put(Outcome(job_id, "t1", 1, "ok"))
    assert acker.run_once() is True
    assert counters.succeeded == 2 and scalar(conn, "SELECT count(*) FROM jobs") == 0


def _heartbeat(database: Database, held: HeldJobs, counters: Counters, lease: float = 600.0) -> Heartbeat:
    return Heartbeat(_parts(database, held, counters), lambda queue: lease)


def test_one_heartbeat_pass_extends_every_held_lease(database, conn):
    enqueue_many([("t1", {"n": i}) for i in range(3)])
    running, unacked, not_held = _claim(database.url, "w", 3, lease=5.0)
    held, counters = _ledger(running=[running], unacked=[unacked]), Counters()
    assert _heartbeat(database, held, counters).run_once() == set()
    extended = dict(conn.execute("SELECT id, lease_until > now() + interval '500 seconds' FROM jobs").fetchall())
    assert extended == {running.id: True, unacked.id: True, not_held.id: False}
    assert counters.lost_leases == 0


def test_a_reaped_lease_is_reported_lost_and_a_cancel_request_is_seen(database, conn):
    enqueue_many([("t1", {"n": i}) for i in range(2)])
    kept, reaped = _claim(database.url, "w", 2)
    held, counters = _ledger(running=[kept, reaped]), Counters()
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
    held, counters = _ledger(running=[job]), Counters()
    database.down = True
    assert _heartbeat(database, held, counters).run_once() == set()
    assert counters.lost_leases == 0 and held.running_ids() == [job.id]
