"""Queue core transitions against real PostgreSQL: claim, fence, reaper, operator actions."""

from __future__ import annotations

import json
import threading

import psycopg
import pytest

from skiplock import enqueue, enqueue_many
from skiplock.core import state_changes
from skiplock.core.state_changes import Outcome
from skiplock.services.reaper import Reaper
from skiplock.tools import bench_seed
from tests.support.helpers import scalar


def _claim(url: str, worker_id: str, queues=("t1",), limit=10) -> list[state_changes.ClaimedJob]:
    with psycopg.connect(url, autocommit=True) as c:
        return state_changes.claim(c, worker_id, list(queues), [30.0] * len(queues), limit)


def _expire(conn, job_ids) -> None:
    """Test setup: pretend the lease ran out (as if the worker froze for its whole lease)."""
    conn.execute("UPDATE jobs SET lease_until = now() - interval '1 second' WHERE id = ANY(%s)", (list(job_ids),))


def test_claim_marks_running_with_owner_lease_and_attempt(db_url, conn):
    job_id = enqueue("t1", {"a": 1})
    [job] = _claim(db_url, "w1")
    assert job.id == job_id and job.payload == {"a": 1} and job.attempts == 1
    row = conn.execute("SELECT status, worker_id, attempts, lease_until > now() FROM jobs").fetchone()
    assert row == ("running", "w1", 1, True)
    assert _claim(db_url, "w2") == []


def test_claim_order_is_priority_then_run_at_then_id_across_queues(db_url):
    ids = enqueue_many([
        {"queue": "t1", "payload": {}, "priority": 0},
        {"queue": "t2", "payload": {}, "priority": 5},
        {"queue": "t1", "payload": {}, "priority": 5},
        {"queue": "t2", "payload": {}, "priority": 0},
    ])
    order = [j.id for j in _claim(db_url, "w", queues=("t1", "t2"), limit=1)]
    order += [j.id for j in _claim(db_url, "w", queues=("t1", "t2"), limit=3)]
    assert order[0] == ids[1]  # priority 5, enqueued first
    assert order[1:] == [ids[2], ids[0], ids[3]]


def test_lean_claim_returns_what_the_worker_needs_in_the_same_order(db_url, conn):
    ids = enqueue_many([{"queue": "t1", "payload": {"n": n}, "priority": n % 3, "max_attempts": 4}
                        for n in range(6)])
    lean = state_changes.claim(conn, "w", ["t1"], [30.0], 6, payload_as_text=True, with_context=False)
    assert sorted(j.id for j in lean) == sorted(ids)
    # priority DESC, then enqueue order: the same order the full claim promises
    assert [j.id for j in lean] == [ids[2], ids[5], ids[1], ids[4], ids[0], ids[3]]
    first = lean[0]
    assert (first.queue, json.loads(first.payload), first.attempts, first.max_attempts) == ("t1", {"n": 2}, 1, 4)
    # the JobContext columns are not claimed (no timestamps decoded per row)
    assert (first.priority, first.run_at, first.created_at, first.started_at, first.unique_key) == (None,) * 5
    running = conn.execute("SELECT count(*) FROM jobs WHERE status = 'running' AND worker_id = 'w'").fetchone()[0]
    assert running == 6
    with pytest.raises(ValueError, match="as text only"):
        state_changes.claim(conn, "w", ["t1"], [30.0], 1, with_context=False)


def test_scheduled_jobs_are_not_claimed_before_run_at(db_url):
    enqueue("t1", {}, delay=3600)
    assert _claim(db_url, "w") == []


def test_paused_queue_is_not_claimed_until_resumed(db_url, conn):
    enqueue("t1", {})
    assert state_changes.pause_queue(conn, "t1", "tester") is True
    assert state_changes.pause_queue(conn, "t1", "tester") is False
    assert _claim(db_url, "w") == []
    assert state_changes.resume_queue(conn, "t1") is True
    assert len(_claim(db_url, "w")) == 1


def test_two_connections_claiming_at_once_never_get_the_same_job(db_url, conn):
    enqueue_many([("t1", {"n": i}) for i in range(400)])
    barrier = threading.Barrier(4)
    results: dict[int, list[int]] = {}

    def grab(index: int) -> None:
        got: list[int] = []
        with psycopg.connect(db_url, autocommit=True) as c:
            barrier.wait()
            while batch := state_changes.claim(c, f"w{index}", ["t1"], [30.0], 7):
                got.extend(j.id for j in batch)
        results[index] = got

    threads = [threading.Thread(target=grab, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    all_ids = [i for got in results.values() for i in got]
    assert len(all_ids) == 400 and len(set(all_ids)) == 400
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == 400
    # more than one connection really took part (SKIP LOCKED let them proceed side by side)
    assert sum(1 for got in results.values() if got) >= 2


def test_ack_is_fenced_on_worker_and_status(db_url, conn):
    job_id = enqueue("t1", {})
    _claim(db_url, "old")
    _expire(conn, [job_id])
    reaped = reaper_once(db_url)
    assert reaped == [(job_id, "t1", "queued")]
    [stolen] = _claim(db_url, "new")
    assert stolen.id == job_id and stolen.attempts == 2
    # the old worker finishes late: its ack must not touch the job the new worker owns
    written = state_changes.ack_batch(conn, "old", [Outcome(job_id, "t1", 1, "ok")], history="delete")
    assert written == set()
    assert conn.execute("SELECT status, worker_id FROM jobs WHERE id = %s", (job_id,)).fetchone() == (
        "running", "new")
    # nor can a late failure report overwrite it
    written = state_changes.ack_batch(conn, "old", [Outcome(job_id, "t1", 1, "dead", error="late")], history="delete")
    assert written == set()
    assert state_changes.ack_batch(conn, "new", [Outcome(job_id, "t1", 2, "ok")], history="delete") == {job_id}
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


def reaper_once(url: str):
    from skiplock.core.plumbing.db import make_pool

    pool = make_pool(url, "test-reaper", size=1, open_wait=True)
    try:
        return Reaper(pool).run_once()
    finally:
        pool.close()


def test_reaper_sends_last_attempt_to_dead_and_leaves_live_leases(db_url, conn):
    a = enqueue("t1", {}, max_attempts=1)
    b = enqueue("t1", {}, max_attempts=5)
    live = enqueue("t1", {})
    _claim(db_url, "w", limit=3)
    _expire(conn, [a, b])
    assert sorted(reaper_once(db_url)) == sorted([(a, "t1", "dead"), (b, "t1", "queued")])
    rows = dict(conn.execute("SELECT id, status::text FROM jobs").fetchall())
    assert rows == {a: "dead", b: "queued", live: "running"}
    err = scalar(conn, "SELECT last_error FROM jobs WHERE id = %s", (a,))
    assert "lease expired" in err
    assert scalar(conn, "SELECT sum(reaped) FROM job_stats") == 2


def test_ack_batch_writes_every_outcome_kind_in_one_statement(db_url, conn):
    ids = enqueue_many([("t1", {"n": i}) for i in range(4)])
    _claim(db_url, "w", limit=4)
    outcomes = [Outcome(ids[0], "t1", 1, "ok"), Outcome(ids[1], "t1", 1, "queued", delay=60, error="boom"),
                Outcome(ids[2], "t1", 1, "dead", error="gone"), Outcome(ids[3], "t1", 1, "failed", error="nope")]
    assert state_changes.ack_batch(conn, "w", outcomes, history="delete") == set(ids)
    rows = {r[0]: r[1:] for r in conn.execute(
        "SELECT id, status::text, run_at > now() + interval '50 seconds', finished_at IS NOT NULL, last_error "
        "FROM jobs")}
    assert ids[0] not in rows
    assert rows[ids[1]] == ("queued", True, False, "boom")
    assert rows[ids[2]] == ("dead", False, True, "gone")
    assert rows[ids[3]] == ("failed", False, True, "nope")
    stats = conn.execute("SELECT completed, retried, dead, failed FROM job_stats").fetchone()
    assert stats == (1, 1, 1, 1)


def test_keep_history_stores_succeeded(db_url, conn):
    job_id = enqueue("t1", {})
    _claim(db_url, "w")
    assert state_changes.ack_batch(conn, "w", [Outcome(job_id, "t1", 1, "ok")], history="keep") == {job_id}
    assert conn.execute("SELECT status::text, finished_at IS NOT NULL, lease_until FROM jobs").fetchone() == (
        "succeeded", True, None)


def test_heartbeat_extends_only_own_running_leases(db_url, conn):
    mine = enqueue("t1", {})
    _claim(db_url, "me")
    conn.execute("UPDATE jobs SET lease_until = now() + interval '1 second'")
    assert state_changes.heartbeat(conn, "me", [mine], [300.0]) == {mine}
    assert scalar(conn, "SELECT lease_until > now() + interval '200 seconds' FROM jobs") is True
    assert state_changes.heartbeat(conn, "someone-else", [mine], [300.0]) == set()


def test_operator_transitions(db_url, conn):
    dead = enqueue("t1", {})
    queued = enqueue("t1", {})
    later = enqueue("t1", {}, delay=3600)
    _claim(db_url, "w", limit=1)
    state_changes.ack_batch(conn, "w", [Outcome(dead, "t1", 1, "dead", error="x")], history="delete")
    # retry resets attempts and makes it ready now
    assert state_changes.retry_finished(conn, [dead, queued]) == [dead]
    assert conn.execute("SELECT status::text, attempts FROM jobs WHERE id = %s", (dead,)).fetchone() == ("queued", 0)
    assert state_changes.run_now(conn, [later]) == [later]
    assert state_changes.cancel_queued(conn, [queued], "alice") == [queued]
    assert scalar(conn, "SELECT last_error FROM jobs WHERE id = %s", (queued,)).startswith("cancelled by alice")
    assert state_changes.purge_finished(conn, [queued, later]) == [queued]
    assert scalar(conn, "SELECT count(*) FROM jobs") == 2
    [running] = _claim(db_url, "w", limit=1)
    assert state_changes.release_running(conn, [running.id], "bob")[0][2] == "queued"


def test_release_own_gives_the_attempt_back(db_url, conn):
    job_id = enqueue("t1", {})
    _claim(db_url, "w")
    assert state_changes.release_own(conn, "other", [job_id]) == []
    assert state_changes.release_own(conn, "w", [job_id]) == [job_id]
    assert conn.execute("SELECT status::text, attempts, worker_id FROM jobs").fetchone() == ("queued", 0, None)


def test_pooled_connections_never_jit_compile_the_claim(db_url, monkeypatch):
    """A claim from a big backlog is costed past jit_above_cost; compiling it took seconds (issue 19
    part 3, tests/benchmarks/growth.py). Every pooled skiplock connection runs with JIT off, except
    behind a transaction-pooling PgBouncer, where a session setting would leak to other clients."""
    from skiplock.core.plumbing.db import make_pool
    from skiplock.core.sql import queries

    with psycopg.connect(db_url, autocommit=True) as c:
        if not scalar(c, "SELECT pg_jit_available()"):
            pytest.skip("this server has no JIT provider")
    enqueue_many([("t1", {"n": i}) for i in range(20)])
    params = {"queues": ["t1"], "leases": "{30}", "versions": f"{{{state_changes.ANY_VERSION}}}",
              "tenant_after": [None],
              "limit": 5, "worker_id": "explain", "limited": []}
    pool = make_pool(db_url, "test-jit", size=1, open_wait=True)
    try:
        with pool.connection() as conn, conn.transaction(force_rollback=True):
            conn.execute("SET LOCAL jit_above_cost = 0")  # any statement would be compiled if JIT were on
            explain = "EXPLAIN (ANALYZE) " + queries("jobs_claim").claim_lean_text
            plan = "\n".join(r[0] for r in conn.execute(explain, params))
            assert scalar(conn, "SHOW jit") == "off"
        assert "JIT" not in plan, plan
    finally:
        pool.close()
    monkeypatch.setenv("SKIPLOCK_PREPARED_STATEMENTS", "off")
    pool = make_pool(db_url, "test-jit-pgbouncer", size=1, open_wait=True)
    try:
        with pool.connection() as conn:
            assert scalar(conn, "SELECT source FROM pg_settings WHERE name = 'jit'") != "session"
    finally:
        pool.close()


def test_the_worker_claim_connection_rules_out_bitmap_scans(db_url, conn):
    """On a table of kept history with interleaved queues the planner, not knowing the claim's LIMIT,
    read every ready job with a bitmap scan and sorted them: 0.4 s per claim at 5,000,000 rows
    (tests/benchmarks/growth.py, EXPLAIN ANALYZE). The worker's claim connection turns bitmap scans
    off, and its claims still take the jobs in order."""
    from skiplock.runtime.claimer import claims_commit_async

    bench_seed.seed_finished_jobs(conn, ["t1", "t2"], 1_000, status="succeeded")
    ids = enqueue_many([("t1", {"n": i}) for i in range(60)])
    with psycopg.connect(db_url, autocommit=True) as c:
        claims_commit_async(c)
        assert scalar(c, "SHOW enable_bitmapscan") == "off" and scalar(c, "SHOW synchronous_commit") == "off"
        assert scalar(c, "SHOW jit") == "off"  # the settings make every claim plan's cost pass jit_above_cost
        jobs = state_changes.claim(c, "w", ["t1"], [30.0], 50, payload_as_text=True, with_context=False)
    assert [j.id for j in jobs] == ids[:50]
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'succeeded'") == 1_000
