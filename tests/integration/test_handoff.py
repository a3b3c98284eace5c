"""The producer's insert trigger hands a new job straight to an idle worker (migration 020).

In the database: a waiter token with a live listener key gets the job claimed for it in the
producer's transaction, and the NOTIFY carries it; every case a claim would refuse, or a dead
listener, gets no hand-off and 015's plain NOTIFY. End to end: real worker processes, jobs
enqueued through the public API and by plain SQL, a hand-off lost with a killed listener
connection, and a worker stopped while a producer holds its token.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import conninfo

from skiplock import enqueue, enqueue_many
from skiplock.core import state_changes
from skiplock.core.features import handoff
from skiplock.core.features.limits import set_limit
from skiplock.core.features.waiting import Waiting
from tests.support.helpers import scalar, wait_for

LEASE = 45.0


class FakeListener:
    """A real connection doing what a worker's listener does: LISTEN on both channels, hold a key."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute("LISTEN skiplock_jobs")
        self.conn.execute(f"LISTEN {handoff.HANDOFF_CHANNEL}")
        self.key = handoff.take_listen_key(self.conn)

    def notes(self) -> list[tuple[str, str]]:
        return [(n.channel, n.payload) for n in self.conn.notifies(timeout=0.5)]


@pytest.fixture
def listener(db_url: str) -> Iterator[FakeListener]:
    fake = FakeListener(db_url)
    yield fake
    fake.conn.close()


def _row(conn: psycopg.Connection, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...]:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row


def _register(db_url: str, worker_id: str, queues: list[str], key: int | None, version: int = 1) -> None:
    waiting = Waiting(lambda: psycopg.connect(db_url, autocommit=True), worker_id, queues,
                      [LEASE] * len(queues), [version] * len(queues))
    waiting.listen_key = key
    assert waiting.enter()


def test_a_new_job_is_claimed_for_the_waiting_worker_and_sent_in_the_notify(
        db_url: str, conn: psycopg.Connection, listener: FakeListener) -> None:
    _register(db_url, "w1", ["ho", "other"], listener.key)
    job_id = enqueue("ho", {"n": 1, "text": "line one\nline two"}, tenant="acme")

    status, worker, attempts, lease = _row(conn, "SELECT status, worker_id, attempts, "
                                                 "extract(epoch FROM lease_until - started_at) FROM jobs WHERE id = %s",
                                           (job_id,))
    assert (status, worker, attempts, float(lease)) == ("running", "w1", 1, LEASE)
    assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 0  # both of w1's tokens taken
    [(channel, payload)] = listener.notes()  # no '' as well: no other worker's token was taken
    assert channel == handoff.HANDOFF_CHANNEL
    worker_id, job = handoff.parse(payload)
    assert worker_id == "w1"
    assert (job.id, job.queue, job.attempts, job.tenant, job.version) == (job_id, "ho", 1, "acme", 1)
    assert json.loads(job.payload) == {"n": 1, "text": "line one\nline two"}
    started = scalar(conn, "SELECT started_at FROM jobs WHERE id = %s", (job_id,))
    assert job.started_at == started and job.created_at is not None and job.run_at is not None


def test_a_single_job_wakes_one_worker_and_the_others_stay_registered(db_url: str, conn: psycopg.Connection,
                                                                       listener: FakeListener) -> None:
    # migration 024: a transaction's one job takes only its worker's tokens, and no plain NOTIFY
    _register(db_url, "w1", ["ho", "other"], listener.key)
    other = FakeListener(db_url)
    try:
        _register(db_url, "w2", ["ho", "other"], other.key)
        job_id = enqueue("ho", {})
        handed_to = scalar(conn, "SELECT worker_id FROM jobs WHERE id = %s", (job_id,))
        assert handed_to == "w1"  # the longest waiting
        assert [c for c, _ in listener.notes()] == [handoff.HANDOFF_CHANNEL]
        assert [(w, q) for w, q in conn.execute("SELECT worker_id, queue FROM queue_waiters ORDER BY queue")] == [
            ("w2", "ho"), ("w2", "other")]
        job_id = enqueue("ho", {})  # the next producer finds w2's token
        assert scalar(conn, "SELECT worker_id FROM jobs WHERE id = %s", (job_id,)) == "w2"
        # w2 heard both hand-offs (the channel is everyone's; each names its worker) and no plain NOTIFY
        assert [(c, handoff.parse(p)[0]) for c, p in other.notes()] == [
            (handoff.HANDOFF_CHANNEL, "w1"), (handoff.HANDOFF_CHANNEL, "w2")]
        assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 0
    finally:
        other.conn.close()


def test_a_transaction_of_several_jobs_wakes_every_waiting_worker(db_url: str, conn: psycopg.Connection,
                                                                  listener: FakeListener) -> None:
    # more than one job: the newest is handed over, every token is taken, the others get the plain NOTIFY
    _register(db_url, "w1", ["ho"], listener.key)
    other = FakeListener(db_url)
    try:
        _register(db_url, "w2", ["ho"], other.key)
        ids = enqueue_many([("ho", {"n": n}) for n in range(3)])
        assert scalar(conn, "SELECT worker_id FROM jobs WHERE id = %s", (max(ids),)) == "w1"
        assert [c for c, _ in listener.notes()] == [handoff.HANDOFF_CHANNEL, "skiplock_jobs"]
        assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 0
        assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'ho' AND status = 'queued'") == 2
    finally:
        other.conn.close()


def test_one_job_per_statement_in_one_transaction_goes_to_one_worker_each(
        db_url: str, conn: psycopg.Connection, listener: FakeListener) -> None:
    # the first statement's job is the transaction's only one so far: w1's tokens alone; the second
    # finds w2's token and hands its job there. Both NOTIFYs arrive at the commit, nothing is left queued.
    _register(db_url, "w1", ["ho"], listener.key)
    other = FakeListener(db_url)
    try:
        _register(db_url, "w2", ["ho"], other.key)
        with conn.transaction():
            first = enqueue("ho", {"n": 1}, conn=conn)
            second = enqueue("ho", {"n": 2}, conn=conn)
        assert [scalar(conn, "SELECT worker_id FROM jobs WHERE id = %s", (i,)) for i in (first, second)] == ["w1", "w2"]
        assert [(c, handoff.parse(p)[0]) for c, p in listener.notes()] == [
            (handoff.HANDOFF_CHANNEL, "w1"), (handoff.HANDOFF_CHANNEL, "w2")]
        assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 0
    finally:
        other.conn.close()


def _not_handed(conn: psycopg.Connection, listener: FakeListener, job_id: int) -> None:
    assert scalar(conn, "SELECT status FROM jobs WHERE id = %s", (job_id,)) == "queued"
    assert listener.notes() == [("skiplock_jobs", "")]  # 015's NOTIFY: the worker claims


@pytest.mark.parametrize("case", ["paused", "limited", "lock_key", "scheduled", "newer_version", "big_payload"])
def test_a_job_a_claim_would_not_take_now_is_not_handed(db_url: str, conn: psycopg.Connection,
                                                        listener: FakeListener, case: str) -> None:
    _register(db_url, "w1", ["ho"], listener.key)
    options: dict[str, Any] = {}
    payload: Any = {}
    if case == "paused":
        state_changes.pause_queue(conn, "ho", "test")
    elif case == "limited":
        set_limit(conn, "ho", concurrency=1, rate=None)
    elif case == "lock_key":
        options["lock_key"] = "account-7"
    elif case == "scheduled":
        options["delay"] = 60
    elif case == "newer_version":
        options["version"] = 2  # the worker's token says it runs version 1
    elif case == "big_payload":
        payload = {"blob": "x" * 7100}  # a NOTIFY's payload must stay under 8000 bytes
    job_id = enqueue("ho", payload, **options)
    _not_handed(conn, listener, job_id)


def test_a_dead_listener_or_an_old_token_gets_no_job(db_url: str, conn: psycopg.Connection,
                                                     listener: FakeListener) -> None:
    gone = FakeListener(db_url)
    dead_key = gone.key
    gone.conn.close()  # its session's lock is released: nobody would read the NOTIFY
    _register(db_url, "w1", ["ho"], dead_key)
    _not_handed(conn, listener, enqueue("ho", {}))
    _register(db_url, "w1", ["ho"], None)  # a worker without a listener key (an older worker)
    _not_handed(conn, listener, enqueue("ho", {}))


def test_a_job_this_transaction_did_not_insert_is_not_handed(db_url: str, conn: psycopg.Connection,
                                                             listener: FakeListener) -> None:
    """The session's last id is an older committed job: handing it would hold it in this transaction."""
    with psycopg.connect(db_url) as producer:
        old = enqueue("ho", {}, conn=producer)
        producer.commit()
        listener.notes()
        _register(db_url, "w1", ["ho"], listener.key)
        # a job with its own id: currval still names `old`, which this transaction did not insert
        producer.execute("INSERT INTO jobs (id, queue, payload) VALUES (1000000, 'ho', '{}')")
        producer.commit()
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'queued'") == 2, old
    assert listener.notes() == [("skiplock_jobs", "")]


def test_a_rolled_back_hand_off_leaves_nothing(db_url: str, conn: psycopg.Connection,
                                               listener: FakeListener) -> None:
    _register(db_url, "w1", ["ho"], listener.key)
    with psycopg.connect(db_url) as producer:
        job_id = enqueue("ho", {}, conn=producer)
        assert producer.execute("SELECT worker_id FROM jobs WHERE id = %s", (job_id,)).fetchone() == ("w1",)
        producer.rollback()
        # in a savepoint that rolls back: the job, the hand-off, the token's deletion and the
        # NOTIFY all go with it
        with producer.transaction(), pytest.raises(RuntimeError), producer.transaction():
            enqueue("ho", {}, conn=producer)
            raise RuntimeError("the business step failed")
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0
    assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 1  # the token is still out
    assert listener.notes() == []


def test_repeatable_read_producers_only_notify(db_url: str, conn: psycopg.Connection,
                                               listener: FakeListener) -> None:
    _register(db_url, "w1", ["ho"], listener.key)
    with psycopg.connect(db_url) as producer:
        producer.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        job_id = enqueue("ho", {}, conn=producer)
    _not_handed(conn, listener, job_id)


def test_a_producer_role_without_update_on_jobs_still_enqueues(db_url: str, conn: psycopg.Connection,
                                                              listener: FakeListener) -> None:
    """A least-privilege producer (INSERT only) loses the hand-off, never its insert."""
    role = f"skiplock_producer_{os.getpid()}"
    conn.execute(f"DROP ROLE IF EXISTS {role}")
    conn.execute(f"CREATE ROLE {role} LOGIN")
    try:
        conn.execute(f"GRANT SELECT, INSERT ON jobs TO {role}")
        conn.execute(f"GRANT USAGE ON SEQUENCE jobs_id_seq TO {role}")
        conn.execute(f"GRANT SELECT, UPDATE, DELETE ON queue_waiters TO {role}")  # 015: taking tokens
        conn.execute(f"GRANT SELECT ON paused_queues, queue_limits TO {role}")
        _register(db_url, "w1", ["ho"], listener.key)
        with psycopg.connect(conninfo.make_conninfo(db_url, user=role), autocommit=True) as producer:
            job_id = producer.execute("INSERT INTO jobs (queue, payload) VALUES ('ho', '{}') RETURNING id").fetchone()
        assert job_id is not None
        _not_handed(conn, listener, job_id[0])
    finally:
        conn.execute(f"REASSIGN OWNED BY {role} TO CURRENT_USER")
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


# ---- real workers ---------------------------------------------------------------------------------

def _keyed_tokens(conn: psycopg.Connection) -> int:
    return int(scalar(conn, "SELECT count(*) FROM queue_waiters WHERE listen_key IS NOT NULL"))


def _listener_backend(conn: psycopg.Connection) -> int:
    return int(scalar(conn, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                            "AND application_name LIKE 'skiplock-listener%%'"))


def _effects(conn: psycopg.Connection, job_id: int) -> list[tuple[int, int]]:
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT attempt, pid FROM test_effects WHERE job_id = %s ORDER BY attempt", (job_id,)).fetchall()]


@pytest.mark.parametrize("queue", ["t1", "aeffect"])  # a thread handler, an `async def` handler
def test_a_real_worker_runs_jobs_handed_by_enqueue_and_by_plain_sql(
        db_url: str, conn: psycopg.Connection, spawn_worker: Any, queue: str) -> None:
    tasks = "tests.support.handlers" if queue == "t1" else "tests.support.async_handlers"
    worker = spawn_worker(SKIPLOCK_TASKS=tasks, SKIPLOCK_QUEUES=queue)
    for producer_kind in ("enqueue", "sql"):
        wait_for(lambda: _keyed_tokens(conn) > 0, message="the idle worker's token with its listener key")
        with psycopg.connect(db_url) as producer:
            if producer_kind == "enqueue":
                job_id = enqueue(queue, {"kind": producer_kind}, conn=producer)
            else:  # the documented INSERT, from any language
                job_id = _row(producer, "INSERT INTO jobs (queue, payload) VALUES (%s, %s) RETURNING id",
                              (queue, json.dumps({"kind": producer_kind})))[0]
            # claimed for the worker before the producer commits: nothing else could have claimed it
            status, worker_id = _row(producer, "SELECT status, worker_id FROM jobs WHERE id = %s", (job_id,))
            assert status == "running" and worker_id.split(":")[1] == str(worker.pid)
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, message="the handed job done")
        assert _effects(conn, job_id) == [(1, worker.pid)]


def test_a_hand_off_lost_with_the_listeners_connection_is_released_and_runs_once(
        db_url: str, conn: psycopg.Connection, spawn_worker: Any) -> None:
    worker = spawn_worker(SKIPLOCK_TASKS="tests.support.handlers", SKIPLOCK_QUEUES="t1")
    wait_for(lambda: _keyed_tokens(conn) > 0, message="the idle worker's token")
    old_listener = _listener_backend(conn)
    with psycopg.connect(db_url) as producer:
        job_id = enqueue("t1", {}, conn=producer)
        assert producer.execute("SELECT status FROM jobs WHERE id = %s", (job_id,)).fetchone() == ("running",)
        # the listener's connection dies after the producer's check: its NOTIFY reaches nobody
        conn.execute("SELECT pg_terminate_backend(%s)", (old_listener,))
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                (old_listener,)) == 0, message="the old listener backend gone")
    # the worker reconnects, finds a job of its own it never received, and releases it with its
    # attempt not counted; then it claims and runs it: one run, attempt 1
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, timeout=60,
             message="the lost hand-off released and run")
    assert _effects(conn, job_id) == [(1, worker.pid)]
    assert "whose NOTIFY was lost" in worker.log()


def test_a_worker_stopping_while_a_producer_holds_its_token_leaves_no_job_behind(
        db_url: str, conn: psycopg.Connection, spawn_worker: Any) -> None:
    worker = spawn_worker(SKIPLOCK_TASKS="tests.support.handlers", SKIPLOCK_QUEUES="t1")
    wait_for(lambda: _keyed_tokens(conn) > 0, message="the idle worker's token")
    with psycopg.connect(db_url) as producer:
        job_id = enqueue("t1", {}, conn=producer)  # handed to the worker, not committed yet
        worker.proc.send_signal(15)  # SIGTERM: a clean stop begins
        # the worker's stop waits for nothing of this job: it is not the worker's until the commit
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                      "AND application_name LIKE 'skiplock-listener%%'") == 0,
                 message="the listener gone")
    assert worker.terminate() == 0
    # whatever the order, the job is queued again, not running under a stopped worker's id
    row = conn.execute("SELECT status, worker_id, attempts FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == ("queued", None, 0)


def test_two_real_workers_a_single_job_takes_one_workers_token_and_leaves_the_others(
        db_url: str, conn: psycopg.Connection, spawn_worker: Any) -> None:
    # migration 024, end to end: each single-job enqueue is handed to one of two idle worker processes;
    # the other is not woken, so its token row is the same row before and after (the old trigger took
    # it and sent a NOTIFY, and the worker wrote a new one)
    workers = [spawn_worker(SKIPLOCK_TASKS="tests.support.handlers", SKIPLOCK_QUEUES="t1", SKIPLOCK_POLL_INTERVAL="60")
               for _ in range(2)]
    pids = {str(w.pid) for w in workers}

    def tokens() -> dict[str, Any]:  # pid -> its token's `since`, keyed tokens only
        return {r[0].split(":")[1]: r[1] for r in conn.execute(
            "SELECT worker_id, since FROM queue_waiters WHERE listen_key IS NOT NULL AND queue = 't1'")}

    ran_on: list[int] = []
    for n in range(6):
        wait_for(lambda: set(tokens()) == pids, message="both idle workers' tokens")
        before = tokens()
        job_id = enqueue("t1", {"n": n})
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, message="the job done")
        [(attempt, pid)] = _effects(conn, job_id)
        assert attempt == 1
        ran_on.append(pid)
        wait_for(lambda: set(tokens()) == pids, message="the worker that ran it registered again")
        after = tokens()
        [other] = pids - {str(pid)}
        assert after[other] == before[other], "the other worker's token was taken"
        assert after[str(pid)] != before[str(pid)]
    assert {str(p) for p in ran_on} == pids  # the longest-waiting worker gets each: both get some
