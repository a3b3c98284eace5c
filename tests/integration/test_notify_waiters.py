"""NOTIFY only while a worker waits (migrations 014, 015): producers skip the NOTIFY's commit lock when
no worker is idle, the first producer after a worker went idle takes its waiter rows (a one-shot
token) so the producers after it skip it too, and an idle worker is still woken by a plain SQL INSERT.

The worker polls every 60 s here, so a job it runs within the test's deadline was found through the
NOTIFY or the claim after registering, not the poll.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any

import psycopg

from skiplock.core.features.waiting import Waiting
from skiplock.core.plumbing.config import load_settings
from skiplock.core.registry import Registry, Task
from skiplock.core.sql import queries
from skiplock.runtime.runner import Worker
from tests.support.helpers import scalar, wait_for

WAITERS_SQL = queries("waiters")


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
    # 60 x 0.2 s of backlog: long enough that, on a loaded machine too, the worker is still busy (and so not
    # registered) while the insert below is made and listened to (20 once ran out first, and it registered)
    conn.execute("INSERT INTO jobs (queue, payload) SELECT 't2', jsonb_build_object('sleep', 0.2) "
                 "FROM generate_series(1, 60)")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") == 0, timeout=30,
             message="the busy worker to leave the waiters")
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 't2' AND status = 'queued'") > 10
    assert _notifications_after_insert(db_url, conn) == []  # producers now commit without a NOTIFY
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 't2'") == 0, timeout=60,
             message="the backlog to drain")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") == 1, timeout=30,
             message="the idle worker to register again")


def test_a_worker_keeping_up_with_a_stream_of_single_job_producers_costs_them_few_notifies(
        db_url: str, conn: Any, spawn_worker: Any) -> None:
    # Jobs arriving one by one: each claim finds one or two. Registering as a waiter after each would
    # make nearly every producer take a token and send a NOTIFY (and hand the job over); the worker
    # looks again shortly instead, and only registers when a claim finds nothing (claimer.py).
    spawn_worker(SKIPLOCK_QUEUES="t1", SKIPLOCK_POLL_INTERVAL="60")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") == 1, timeout=60, message="registered")
    jobs = 3000
    with psycopg.connect(db_url, autocommit=True) as listener:
        listener.execute("LISTEN skiplock_jobs")
        listener.execute("LISTEN skiplock_handoff")
        for n in range(jobs):  # one job per transaction, as fast as one connection goes
            conn.execute("INSERT INTO jobs (queue, payload) VALUES ('t1', %s)", (psycopg.types.json.Jsonb({"n": n}),))
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE queue = 't1'") == jobs, timeout=120,
                 message="the worker to run every job")
        listener.execute("SELECT 1")
        notifies = len(list(listener.notifies(timeout=0.5)))
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 't1'") == 0
    assert notifies < jobs // 20, f"{notifies} NOTIFYs for {jobs} jobs"


def test_a_killed_workers_waiter_rows_are_pruned_by_the_reaper(db_url: str, conn: Any, spawn_worker: Any) -> None:
    dead = spawn_worker(SKIPLOCK_QUEUES="t3", SKIPLOCK_POLL_INTERVAL="60")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") == 1, timeout=60, message="registered")
    dead.kill()
    # make the dead worker's rows old enough to prune (its worker row stops being live after 30 s)
    conn.execute("UPDATE queue_waiters SET since = now() - interval '1 hour'")
    conn.execute("UPDATE workers SET last_seen = now() - interval '1 hour'")
    from skiplock.core.features import waiting

    assert waiting.prune_gone(conn) == 1
    assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 0


# ---- the token, in SQL alone: what any producer's INSERT does -----------------------------------


def _waiter(conn: Any, worker: str = "w1", queue: str = "t1") -> None:
    """A token as a worker writes it: the row, then (committed) the flag in front of the trigger."""
    conn.execute("INSERT INTO queue_waiters (worker_id, queue) VALUES (%s, %s)", (worker, queue))
    conn.execute(WAITERS_SQL.waiting_flag_set)


def _flag_set(conn: Any) -> bool:
    return bool(scalar(conn, "SELECT pg_sequence_last_value('skiplock_waiting') IS NOT NULL"))


def _trigger_calls_of_one_insert(conn: Any) -> int:
    """Insert one job; how many times that statement ran the trigger's function (0: its WHEN was false)."""
    # the backend's counts not yet flushed include earlier transactions': count the difference
    calls = ("SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions "
             "WHERE funcname = 'skiplock_notify_jobs'")
    with conn.transaction():
        conn.execute("SET LOCAL track_functions = 'pl'")
        before = int(scalar(conn, calls))
        conn.execute("INSERT INTO jobs (queue, payload) VALUES ('nobody_serves', '{}')")
        return int(scalar(conn, calls)) - before


def test_with_no_token_the_flag_is_cleared_and_producers_run_no_trigger_function(conn: Any) -> None:
    conn.execute(WAITERS_SQL.waiting_flag_set)  # stale: set by a worker whose token is gone since
    assert _trigger_calls_of_one_insert(conn) == 1  # that producer looks, finds none, clears it
    assert not _flag_set(conn)
    assert _trigger_calls_of_one_insert(conn) == 0  # the WHEN is false: no function at all
    _waiter(conn)
    assert _trigger_calls_of_one_insert(conn) == 1  # takes the token ...
    assert _flag_set(conn)  # ... and leaves the flag: a rollback would bring the token back
    assert _trigger_calls_of_one_insert(conn) == 1
    assert _trigger_calls_of_one_insert(conn) == 0


def test_a_worker_registering_while_producers_clear_the_flag_always_leaves_it_set(db_url: str, conn: Any) -> None:
    # The flag is not transactional: the order of the writes is the whole protocol (migration 022).
    # Producers insert as fast as they can (taking tokens, or clearing the flag when they find none)
    # while a worker registers again and again. Once everyone has stopped, a token left standing
    # must have the flag set with it, or no producer would ever look for it again.
    waiting = Waiting(lambda: psycopg.connect(db_url, autocommit=True), "w1", ["t1"])
    errors: list[BaseException] = []
    outcomes = {"standing": 0, "taken": 0}
    for _ in range(40):
        stop = threading.Event()

        def produce(stop: threading.Event = stop) -> None:
            try:
                with psycopg.connect(db_url, autocommit=True) as producer:
                    while not stop.is_set():
                        producer.execute("INSERT INTO jobs (queue, payload) VALUES ('nobody_serves', '{}')")
            except BaseException as exc:  # reported below: a thread's error must fail the test
                errors.append(exc)

        producers = [threading.Thread(target=produce) for _ in range(3)]
        for thread in producers:
            thread.start()
        try:
            for _ in range(5):
                waiting.forget()  # as after each wake-up
                waiting.enter()
        finally:
            stop.set()
            for thread in producers:
                thread.join(timeout=60)
        if scalar(conn, "SELECT count(*) FROM queue_waiters"):
            outcomes["standing"] += 1
            assert _flag_set(conn), "a token is standing with the flag clear: producers would never look"
        else:
            outcomes["taken"] += 1
    assert not errors, errors
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'nobody_serves'") >= 40
    assert sum(outcomes.values()) == 40


def test_the_first_producer_takes_the_token_and_the_next_sends_no_notify(db_url: str, conn: Any) -> None:
    _waiter(conn, "w1", "t1")
    _waiter(conn, "w1", "t2")
    _waiter(conn, "w2", "t1")
    assert _notifications_after_insert(db_url, conn) == [""]  # one NOTIFY wakes every listener
    assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 0
    assert _notifications_after_insert(db_url, conn) == []


def test_a_token_held_by_an_open_transaction_is_skipped_not_waited_for(db_url: str, conn: Any) -> None:
    _waiter(conn)
    with psycopg.connect(db_url, autocommit=True) as listener, psycopg.connect(db_url) as slow:
        listener.execute("LISTEN skiplock_jobs")
        slow.execute("SET lock_timeout = '5s'")  # a wait on the token would fail the test, not hang it
        slow.execute("INSERT INTO jobs (queue, payload) VALUES ('nobody_serves', '{}')")  # takes the token
        conn.execute("SET lock_timeout = '5s'")
        conn.execute("INSERT INTO jobs (queue, payload) VALUES ('nobody_serves', '{}')")  # skips it, at once
        listener.execute("SELECT 1")
        assert [n.payload for n in listener.notifies(timeout=0.2, stop_after=10)] == []
        slow.commit()  # the holder's NOTIFY comes with its commit
        listener.execute("SELECT 1")
        assert [n.payload for n in listener.notifies(timeout=0.2, stop_after=10)] == [""]
    assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 0


def test_a_rolled_back_producer_leaves_the_token(db_url: str, conn: Any) -> None:
    _waiter(conn)
    with psycopg.connect(db_url) as producer:
        producer.execute("INSERT INTO jobs (queue, payload) VALUES ('nobody_serves', '{}')")
        producer.rollback()
    assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 1
    assert _notifications_after_insert(db_url, conn) == [""]


def test_repeatable_read_producers_notify_without_taking_the_token(db_url: str, conn: Any) -> None:
    # Taking a token another producer took after this transaction's snapshot would be a
    # serialization failure in the user's own transaction: under REPEATABLE READ it only notifies.
    _waiter(conn)
    with psycopg.connect(db_url) as early, psycopg.connect(db_url, autocommit=True) as listener:
        listener.execute("LISTEN skiplock_jobs")
        early.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        early.execute("SELECT 1")  # the snapshot, taken while the token exists
        conn.execute("INSERT INTO jobs (queue, payload) VALUES ('nobody_serves', '{}')")  # takes it
        early.execute("INSERT INTO jobs (queue, payload) VALUES ('nobody_serves', '{}')")  # still sees it
        early.commit()
        listener.execute("SELECT 1")
        assert [n.payload for n in listener.notifies(timeout=0.2, stop_after=10)] == ["", ""]
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'nobody_serves'") == 2


# ---- the worker's side of the races --------------------------------------------------------------


def test_a_job_committed_between_the_empty_claim_and_the_registration_is_claimed(
        db_url: str, conn: Any, monkeypatch: Any) -> None:
    # No waiter row exists when this job commits, so its INSERT sends no NOTIFY: only the claim the
    # worker makes right after registering can find it before the 60 s poll.
    ran: list[Any] = []
    done = threading.Event()
    registry = Registry()

    def handler(payload: Any) -> None:
        ran.append(payload)
        done.set()

    registry.add(Task("race", handler, wants_job=False))
    monkeypatch.setenv("SKIPLOCK_POLL_INTERVAL", "60")
    worker = Worker(load_settings(), registry=registry, queues=["race"])
    real_enter = worker.waiting.enter
    calls: list[list[str]] = []

    def enter_after_a_commit() -> bool:
        if not calls:  # the first idle pass: its claim found nothing, it has not registered yet
            with psycopg.connect(db_url, autocommit=True) as listener:
                listener.execute("LISTEN skiplock_jobs")
                conn.execute("INSERT INTO jobs (queue, payload) VALUES ('race', '{\"n\": 1}')")
                listener.execute("SELECT 1")
                calls.append([n.payload for n in listener.notifies(timeout=0.2, stop_after=10)])
        return real_enter()

    monkeypatch.setattr(worker.waiting, "enter", enter_after_a_commit)
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False}, daemon=True)
    thread.start()
    try:
        assert done.wait(30), "the job committed before the registration waited for the poll"
    finally:
        worker.request_stop()
        thread.join(timeout=60)
    assert calls[0] == []  # nobody was registered: the job's INSERT sent no NOTIFY
    assert ran == [{"n": 1}]
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'race'") == 0, timeout=30,
             message="the ack")


def test_a_notify_for_the_token_being_written_leaves_the_worker_unregistered(db_url: str, conn: Any) -> None:
    # The listener may hear a producer take the new token before enter() has returned; enter() must
    # then not believe it is registered, or it would never register again and wait for polls only.
    waiting: Waiting

    @contextlib.contextmanager
    def connection_that_sees_a_producer() -> Any:
        with psycopg.connect(db_url, autocommit=True) as c:
            yield c
        conn.execute("INSERT INTO jobs (queue, payload) VALUES ('nobody_serves', '{}')")  # takes the token
        waiting.taken()  # what the listener does on that NOTIFY

    waiting = Waiting(connection_that_sees_a_producer, "w1", ["t1"])
    assert waiting.enter() is True  # the caller claims once more
    assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 0
    assert waiting.registered is False
    waiting.connection = lambda: psycopg.connect(db_url, autocommit=True)
    assert waiting.enter() is True
    assert scalar(conn, "SELECT count(*) FROM queue_waiters") == 1
    assert waiting.enter() is False  # registered: no second write


class _ParkRecorder(threading.Event):
    """The claim loop's wake-up Event, recording how many claims the worker had made at each long wait
    (the idle wait of the poll interval, 60 s here): where the loop parked, and after how many claims."""

    def __init__(self, claims: Any) -> None:
        super().__init__()
        self.claims = claims
        self.parks: list[int] = []

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None and timeout >= 30:
            self.parks.append(len(self.claims()))
        return super().wait(timeout)


def test_after_an_empty_claim_an_idle_worker_registers_first_and_claims_once(
        db_url: str, conn: Any, monkeypatch: Any) -> None:
    # A job handed to an idle worker wakes its claim loop, which claims while the job runs and finds
    # nothing. When the job ends, the loop used to claim again (nothing), register as a waiter, and
    # claim once more (nothing): two empty claims per idle spell. Its last claim having found nothing,
    # it now registers first, and the claim after registering (needed: a job may have committed just
    # before the token) is the only one (claimer.Claimer.run_once, lanes.Lane.found_nothing).
    release = threading.Event()
    started: list[int] = []
    registry = Registry()

    def handler(payload: Any) -> None:
        if payload.get("block"):
            started.append(len(worker.counters.claim_seconds))  # claims made by the time it started
            assert release.wait(30)

    registry.add(Task("idle_spell", handler, wants_job=False))
    monkeypatch.setenv("SKIPLOCK_POLL_INTERVAL", "60")
    worker = Worker(load_settings(), registry=registry, queues=["idle_spell"])
    wake = _ParkRecorder(lambda: worker.counters.claim_seconds)
    worker.signals.wake = wake
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False}, daemon=True)
    thread.start()
    try:
        registered = "SELECT count(*) FROM queue_waiters WHERE queue = 'idle_spell'"
        wait_for(lambda: scalar(conn, registered) == 1, timeout=30, message="registered")
        for n in range(3):  # short jobs first: with short handlers a busy worker does not register
            conn.execute("INSERT INTO jobs (queue, payload) VALUES ('idle_spell', %s)",
                         (psycopg.types.json.Jsonb({"n": n}),))
            wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'idle_spell'") == 0
                     and scalar(conn, registered) == 1, timeout=30, message="the short job done, registered again")
        conn.execute("INSERT INTO jobs (queue, payload) VALUES ('idle_spell', '{\"block\": true}')")
        wait_for(lambda: bool(started), timeout=30, message="the blocking job to start")
        at_start = started[0]
        wait_for(lambda: len(worker.counters.claim_seconds) == at_start + 1, timeout=30,
                 message="the claim the job's start wakes the loop for")
        assert scalar(conn, registered) == 0  # busy with short handlers: no token while it runs
        release.set()
        wait_for(lambda: bool(wake.parks) and wake.parks[-1] > at_start + 1, timeout=30,
                 message="the loop to park after the job")
        assert wake.parks[-1] == at_start + 2, f"{wake.parks[-1] - at_start - 1} claims after the job, 1 expected"
        assert scalar(conn, registered) == 1
    finally:
        release.set()
        worker.request_stop()
        thread.join(timeout=60)


def _done_and_parked_again(conn: Any, wake: _ParkRecorder, parks: int) -> bool:
    """notify_batch's jobs all done, the worker registered again and parked once more since `parks`."""
    return (scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'notify_batch'") == 0
            and scalar(conn, "SELECT count(*) FROM queue_waiters WHERE queue = 'notify_batch'") == 1
            and len(wake.parks) > parks)


def test_a_notify_claim_that_empties_the_queue_of_short_jobs_is_followed_by_one_claim(
        db_url: str, conn: Any, monkeypatch: Any) -> None:
    # A statement of several jobs wakes an idle worker's listener, which claims them (fewer than it
    # asks for: the queue is empty after it). The claim loop used to be woken as the first of them
    # started, claim in the middle of the batch's starts and find nothing, then, after the last
    # finish, register and claim again. With short jobs it now only registers and claims once, after
    # the last finish (claimer.Claimer.on_notify).
    registry = Registry()
    registry.add(Task("notify_batch", lambda payload: None, wants_job=False))
    monkeypatch.setenv("SKIPLOCK_POLL_INTERVAL", "60")
    worker = Worker(load_settings(), registry=registry, queues=["notify_batch"])
    claims = worker.counters.claim_seconds
    wake = _ParkRecorder(lambda: claims)
    worker.signals.wake = wake
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False}, daemon=True)
    thread.start()
    registered = "SELECT count(*) FROM queue_waiters WHERE queue = 'notify_batch'"
    # payloads too big to travel in a hand-off NOTIFY (migration 024): no job is handed over, the
    # trigger takes the token and sends the '' NOTIFY, and the listener claims the jobs
    several = ("INSERT INTO jobs (queue, payload) SELECT 'notify_batch', jsonb_build_object('n', n, 'pad', "
               "repeat('x', 7100)) FROM generate_series(1, 3) n")
    try:
        wait_for(lambda: scalar(conn, registered) == 1 and bool(wake.parks), timeout=30, message="registered, parked")
        for _ in range(4):  # the first batches measure the handlers as short; the last one is counted
            parks, before = len(wake.parks), len(claims)
            conn.execute(several)
            wait_for(functools.partial(_done_and_parked_again, conn, wake, parks),
                     timeout=30, message="the batch done, registered and parked again")
        assert worker.counters.succeeded == 12 and worker.counters.handed_off == 0
        assert worker.held.lane_of["notify_batch"].sizing.handlers_shorter_than(0.005)
        # the listener's claim of the 3 jobs, and the claim after registering again
        assert len(claims) - before == 2, f"{len(claims) - before} claims for the last batch, 2 expected"
    finally:
        worker.request_stop()
        thread.join(timeout=60)
