"""The worker process end to end: real subprocesses, SIGKILL, SIGTERM, killed connections."""

from __future__ import annotations

import itertools
import time

import pytest

from skiplock import enqueue, enqueue_many
from skiplock.core.features.handoff import HANDOFF_LOCK_CLASS
from tests.support.helpers import scalar, wait_for

pytestmark = pytest.mark.slow


def effects(conn) -> dict[int, int]:
    """job id -> number of runs that recorded an effect."""
    return dict(conn.execute("SELECT job_id, count(*) FROM test_effects GROUP BY job_id").fetchall())


def test_four_workers_drain_10000_jobs_each_exactly_once(conn, spawn_worker):
    ids = enqueue_many([("t1", {"n": i}) for i in range(10_000)])
    workers = [spawn_worker("--concurrency", "8", "--batch-size", "50") for _ in range(4)]
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, timeout=240, message="drain")
    runs = effects(conn)
    assert len(runs) == 10_000 and set(runs) == set(ids)
    assert max(runs.values()) == 1  # no crash here, so nothing may run twice
    pids = {r[0] for r in conn.execute("SELECT DISTINCT pid FROM test_effects")}
    assert len(pids) >= 2  # the work really was shared
    for w in workers:
        assert w.terminate() == 0


def test_a_full_ack_batch_is_written_at_once_and_the_rest_at_the_interval_or_shutdown(conn, spawn_worker):
    # a 10-minute ack interval: only a full batch (5) or the shutdown can write these outcomes in time
    worker = spawn_worker("--concurrency", "5", SKIPLOCK_ACK_INTERVAL_MS="600000", SKIPLOCK_ACK_BATCH="5")
    enqueue_many([("t1", {"n": i}) for i in range(5)])
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, timeout=60, message="the full batch acked")
    late = enqueue_many([("t1", {"n": i}) for i in range(3)])
    wait_for(lambda: all(i in effects(conn) for i in late), message="the three ran")
    # ran, but three results are not a batch: they wait for the interval, still leased to the worker
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running' AND id = ANY(%s)", (late,)) == 3
    assert worker.terminate() == 0
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0  # the graceful shutdown wrote them


def test_sigkill_mid_batch_loses_nothing_and_duplicates_only_in_flight(conn, spawn_worker):
    ids = enqueue_many([("t1", {"sleep": 0.02}) for _ in range(600)])
    victim = spawn_worker("--concurrency", "10", "--batch-size", "10", SKIPLOCK_LEASE_SECONDS="2",
                          SKIPLOCK_REAPER_INTERVAL="0.5")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects") >= 100, message="work under way")
    victim.kill()
    in_flight_at_kill = {r[0] for r in conn.execute("SELECT id FROM jobs WHERE status = 'running'")}
    assert in_flight_at_kill, "the kill should land mid-batch"
    rescuer = spawn_worker("--concurrency", "10", SKIPLOCK_LEASE_SECONDS="2", SKIPLOCK_REAPER_INTERVAL="0.5")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, timeout=120, message="drain after crash")
    runs = effects(conn)
    assert set(runs) == set(ids)  # nothing lost
    duplicated = {job_id for job_id, n in runs.items() if n > 1}
    assert duplicated <= in_flight_at_kill
    assert rescuer.terminate() == 0


def test_retries_back_off_exponentially_then_dead(conn, spawn_worker):
    job_id = enqueue("t1", {"fail_times": 99}, max_attempts=4)
    perm = enqueue("t1", {"permanent": True})
    worker = spawn_worker("--poll-interval", "0.05", SKIPLOCK_BACKOFF_BASE="0.2")
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)) == "dead",
             timeout=60, message="dead after 4 attempts")
    row = conn.execute("SELECT attempts, last_error, finished_at IS NOT NULL FROM jobs WHERE id = %s",
                       (job_id,)).fetchone()
    assert row[0] == 4 and row[2] is True
    assert "RuntimeError: planned failure on attempt 4" in row[1] and "Traceback" in row[1]
    times = [r[0] for r in conn.execute(
        "SELECT at FROM test_effects WHERE job_id = %s ORDER BY attempt", (job_id,))]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    # each retry waits at least base * 2^(n-1): 0.2, 0.4, 0.8 s (lower bounds only: order, not speed)
    assert len(gaps) == 3
    assert gaps[0] >= 0.2 and gaps[1] >= 0.4 and gaps[2] >= 0.8
    # a permanent failure goes straight to dead after one run
    assert conn.execute("SELECT status::text, attempts FROM jobs WHERE id = %s", (perm,)).fetchone() == ("dead", 1)
    assert worker.terminate() == 0


def test_discard_and_retry_after_and_base_exceptions(conn, spawn_worker):
    discard = enqueue("t1", {"discard": True})
    later = enqueue("t1", {"retry_after": 3600})
    kbd = enqueue("t1", {"raise_base": "KeyboardInterrupt"}, max_attempts=1)
    sysexit = enqueue("t1", {"raise_base": "SystemExit"}, max_attempts=1)
    odd = enqueue("t1", {"returns": {"unexpected": [1, 2]}})
    worker = spawn_worker()
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects") == 5, message="all five ran")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == 0, message="acks")
    states = dict(conn.execute("SELECT id, status::text FROM jobs").fetchall())
    assert states == {discard: "failed", later: "queued", kbd: "dead", sysexit: "dead"}  # odd: deleted (ok)
    assert odd not in states
    assert scalar(conn, "SELECT run_at > now() + interval '3000 s' FROM jobs WHERE id = %s", (later,))
    assert "KeyboardInterrupt" in scalar(conn, "SELECT last_error FROM jobs WHERE id = %s", (kbd,))
    # the worker survived both BaseExceptions and still works
    after = enqueue("t1", {})
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (after,)) == 1)
    assert worker.proc.poll() is None
    assert worker.terminate() == 0


def _listener_pid(conn) -> int | None:
    """The listener's backend once it has listened: it then takes its hand-off key (migration 020)."""
    return scalar(conn, "SELECT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid "
                        "AND l.locktype = 'advisory' AND l.classid = %s AND l.objsubid = 2 "
                        "WHERE a.datname = current_database() "
                        "AND a.application_name LIKE 'skiplock-listener%%'", (HANDOFF_LOCK_CLASS,))


def test_notify_wakes_an_idle_worker_long_before_its_poll(conn, spawn_worker):
    worker = spawn_worker("--poll-interval", "10")
    first_listener = wait_for(lambda: _listener_pid(conn), message="listener connected")
    # the listener's connect triggers one claim; after that the worker idles for 10 s
    wait_for(lambda: "starting" in worker.log(), message="worker started")
    idle_since = scalar(conn, "SELECT clock_timestamp()")
    job_id = enqueue("t1", {"wake": 1})
    ran_at = wait_for(lambda: scalar(conn, "SELECT at FROM test_effects WHERE job_id = %s", (job_id,)),
                      timeout=30, message="job run")
    assert (ran_at - idle_since).total_seconds() < 9.5  # it ran before the next 10 s poll could have
    # kill the listening connection: the worker notices, listens again, and NOTIFY works again
    conn.execute("SELECT pg_terminate_backend(%s)", (first_listener,))
    second_listener = wait_for(lambda: (p := _listener_pid(conn)) and p != first_listener and p,
                               message="listener re-established")
    assert second_listener != first_listener
    idle_since = scalar(conn, "SELECT clock_timestamp()")
    job_id = enqueue("t1", {"wake": 2})
    ran_at = wait_for(lambda: scalar(conn, "SELECT at FROM test_effects WHERE job_id = %s", (job_id,)),
                      timeout=30, message="job run after listener loss")
    assert (ran_at - idle_since).total_seconds() < 9.5
    assert worker.terminate() == 0


def test_drain_survives_terminated_connections(conn, spawn_worker):
    ids = enqueue_many([("t1", {"sleep": 0.005}) for _ in range(1500)])
    worker = spawn_worker("--concurrency", "8")
    kills = 0
    deadline = time.monotonic() + 120
    while scalar(conn, "SELECT count(*) FROM jobs") > 0 and time.monotonic() < deadline:
        if kills < 5 and scalar(conn, "SELECT count(*) FROM test_effects") >= 200 * (kills + 1):
            kills += scalar(conn, "SELECT count(*) > 0 FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                  "WHERE datname = current_database() AND application_name LIKE 'skiplock-%%') t")
        time.sleep(0.05)  # pacing of the fault loop, not synchronisation
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, timeout=120, message="drain")
    assert kills >= 3
    runs = effects(conn)
    assert set(runs) == set(ids)  # nothing lost
    assert worker.proc.poll() is None  # the worker stayed up through every kill
    assert worker.terminate() == 0


def test_sigterm_releases_long_jobs_at_once_and_exits_0(conn, spawn_worker):
    ids = enqueue_many([("t1", {"sleep": 60, "no_effect": True}) for _ in range(3)])
    worker = spawn_worker(SKIPLOCK_SHUTDOWN_GRACE="0.5", SKIPLOCK_LEASE_SECONDS="300")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == 3, message="claimed")
    assert worker.terminate(timeout=30) == 0
    # released by the worker itself, not the reaper: the 300 s leases are nowhere near expiry
    rows = conn.execute("SELECT id, status::text, attempts, worker_id FROM jobs ORDER BY id").fetchall()
    assert rows == [(i, "queued", 0, None) for i in ids]
    assert "released 3 unfinished job(s)" in worker.log()
    assert scalar(conn, "SELECT count(*) FROM workers") == 0


def test_sigterm_lets_short_jobs_finish_within_grace(conn, spawn_worker):
    ids = enqueue_many([("t1", {"sleep": 1}) for _ in range(2)])
    worker = spawn_worker(SKIPLOCK_SHUTDOWN_GRACE="30")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == 2, message="claimed")
    assert worker.terminate(timeout=60) == 0
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0
    assert set(effects(conn)) == set(ids)


def test_sigterm_releases_prefetched_jobs_without_running_them(conn, spawn_worker):
    # one slot and three prefetched jobs: the running one finishes within the grace, the three
    # waiting for the slot go straight back to their queue, their attempt given back, never run
    ids = enqueue_many([("t1", {"sleep_after": 1}) for _ in range(4)])
    worker = spawn_worker(SKIPLOCK_CONCURRENCY="1", SKIPLOCK_PREFETCH="3", SKIPLOCK_SHUTDOWN_GRACE="30")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == 4,
             message="one running and three prefetched")
    wait_for(lambda: len(effects(conn)) == 1, message="the first job under way")
    assert worker.terminate(timeout=60) == 0
    ran = effects(conn)
    assert list(ran.values()) == [1]
    [first] = ran
    rows = conn.execute("SELECT id, status::text, attempts, worker_id FROM jobs ORDER BY id").fetchall()
    assert rows == [(i, "queued", 0, None) for i in ids if i != first]  # the first one was acked
    assert "released 3 unfinished job(s)" in worker.log()


def test_worker_registers_itself(conn, spawn_worker):
    worker = spawn_worker("--queues", "t1,t2", "--concurrency", "3")
    row = wait_for(lambda: conn.execute("SELECT pid, queues, concurrency FROM workers").fetchone(),
                   message="worker row")
    assert row == (worker.pid, ["t1", "t2"], 3)
    assert worker.terminate() == 0


def test_json_logs_carry_job_fields(conn, spawn_worker):
    import json

    job_id = enqueue("t1", {})
    worker = spawn_worker(SKIPLOCK_LOG_FORMAT="json")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, message="job done")
    assert worker.terminate() == 0
    lines = [json.loads(line) for line in worker.log().splitlines() if line.startswith("{")]
    done = [entry for entry in lines if entry.get("job_id") == job_id]
    assert done and done[0]["outcome"] == "ok" and done[0]["queue"] == "t1" and "duration_ms" in done[0]


def test_lease_is_extended_by_heartbeat(conn, spawn_worker):
    job_id = enqueue("t1", {"sleep": 4})
    worker = spawn_worker(SKIPLOCK_LEASE_SECONDS="1.5", SKIPLOCK_REAPER_INTERVAL="0.2")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (job_id,)) == 1,
             timeout=30, message="job ran")
    # the job outlived its 1.5 s lease, yet was never reaped because heartbeats kept extending it
    assert scalar(conn, "SELECT coalesce(sum(reaped), 0) FROM job_stats") == 0
    assert scalar(conn, "SELECT max(attempt) FROM test_effects") == 1
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, message="ack")
    assert worker.terminate() == 0
