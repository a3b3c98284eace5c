"""Handlers that take a batch, in real worker processes: batches fill up to batch_size, a partial batch
runs after batch_wait, BatchItemsFailed retries only the jobs it names, a plain exception retries them
all (each per its own max_attempts), a SIGKILL mid-batch loses nothing, a cancel reaches one member,
SIGTERM gives a gathering batch back, a batch that outlives its leases has its acks dropped (fenced)
while its jobs finish elsewhere.

Handlers are in tests/support/batch_handlers.py: each call writes a test_effects row per job.
"""

from __future__ import annotations

from typing import Any

from skiplock import enqueue_many
from skiplock.core.features import cancel
from tests.fault.conftest import FAST_RECOVERY, settle_killed
from tests.support.helpers import scalar, wait_for

BATCHES = "tests.support.batch_handlers"


def left(conn, queue: str = "bev") -> int:
    return scalar(conn, "SELECT count(*) FROM jobs WHERE queue = %s AND status IN ('queued', 'running')", (queue,))


def calls(conn, queue: str = "bev") -> dict[str, list[int]]:
    """call id -> the ids of the jobs it was given (from its outcome rows, not its 'started' rows)."""
    rows = conn.execute("SELECT payload->>'call', job_id FROM test_effects WHERE queue = %s AND payload ? 'ok' "
                        "ORDER BY job_id", (queue,)).fetchall()
    found: dict[str, list[int]] = {}
    for call, job_id in rows:
        found.setdefault(call, []).append(job_id)
    return found


def runs(conn, queue: str = "bev") -> dict[int, list[tuple[int, bool]]]:
    """job id -> [(attempt, ok)] of its runs, in order."""
    found: dict[int, list[tuple[int, bool]]] = {}
    for job_id, attempt, ok in conn.execute(
            "SELECT job_id, attempt, (payload->>'ok')::bool FROM test_effects WHERE queue = %s AND payload ? 'ok' "
            "ORDER BY at", (queue,)).fetchall():
        found.setdefault(job_id, []).append((attempt, ok))
    return found


def spawn(spawn_worker: Any, **settings: str) -> Any:
    return spawn_worker(**{**FAST_RECOVERY, "SKIPLOCK_TASKS": BATCHES, "SKIPLOCK_QUEUES": "bev", **settings})


def test_batches_fill_up_to_batch_size_then_the_rest_runs_after_batch_wait(conn, spawn_worker):
    ids = enqueue_many([("bev", {"n": i}) for i in range(25)])
    worker = spawn(spawn_worker, BATCH_SIZE="10", BATCH_WAIT="1")
    wait_for(lambda: left(conn) == 0, timeout=60, message="25 events handled")
    assert worker.terminate() == 0
    made = calls(conn)
    # two full batches, and the 5 left over once they had waited batch_wait
    assert sorted(len(job_ids) for job_ids in made.values()) == [5, 10, 10], made
    assert sorted(j for job_ids in made.values() for j in job_ids) == sorted(ids)  # each job once
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'bev'") == 0


def test_a_partial_batch_runs_after_batch_wait(conn, spawn_worker):
    worker = spawn(spawn_worker, BATCH_SIZE="100", BATCH_WAIT="0.5")
    wait_for(lambda: "starting" in worker.log(), timeout=60, message="the worker to start")
    ids = enqueue_many([("bev", {"n": i}) for i in range(3)])
    wait_for(lambda: left(conn) == 0, timeout=60, message="3 events handled without a full batch")
    assert worker.terminate() == 0
    assert sorted(j for job_ids in calls(conn).values() for j in job_ids) == sorted(ids)
    assert all(len(job_ids) <= 3 for job_ids in calls(conn).values())


def test_batch_items_failed_retries_only_the_named_jobs(conn, spawn_worker):
    ids = enqueue_many([("bev", {"n": i, **({"fail": True} if i in (1, 4) else {})}) for i in range(6)])
    worker = spawn(spawn_worker, BATCH_SIZE="6", BATCH_WAIT="5")
    wait_for(lambda: left(conn) == 0, timeout=60, message="the failed events retried")
    assert worker.terminate() == 0
    done = runs(conn)
    named = {ids[1], ids[4]}
    for job_id in ids:
        if job_id in named:
            assert done[job_id] == [(1, False), (2, True)], (job_id, done[job_id])  # failed alone, then retried
        else:
            assert done[job_id] == [(1, True)], (job_id, done[job_id])  # succeeded once, never re-run
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'bev'") == 0


def test_a_plain_exception_fails_every_job_each_per_its_own_attempts(conn, spawn_worker):
    ids = enqueue_many([{"queue": "bev", "payload": {"n": 0, "boom": True}},
                        {"queue": "bev", "payload": {"n": 1}},
                        {"queue": "bev", "payload": {"n": 2}, "max_attempts": 1}])
    worker = spawn(spawn_worker, BATCH_SIZE="3", BATCH_WAIT="5")
    wait_for(lambda: left(conn) == 0, timeout=60, message="the batch retried")
    assert worker.terminate() == 0
    done = runs(conn)
    assert done[ids[0]] == [(1, False), (2, True)] and done[ids[1]] == [(1, False), (2, True)]
    assert done[ids[2]] == [(1, False)]  # its only attempt: dead with the batch's error
    status, error = conn.execute("SELECT status, last_error FROM jobs WHERE id = %s", (ids[2],)).fetchone()
    assert status == "dead" and "the whole batch of 3 failed" in error


def test_batch_items_failed_naming_a_stranger_fails_the_whole_batch(conn, spawn_worker):
    ids = enqueue_many([("bev", {"n": 0, "stranger": True}), ("bev", {"n": 1})])
    worker = spawn(spawn_worker, BATCH_SIZE="2", BATCH_WAIT="5", SKIPLOCK_BACKOFF_BASE="30",
                   SKIPLOCK_BACKOFF_CAP="60")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'queued' AND attempts = 1") == 2,
             timeout=60, message="both jobs back to retry")
    assert worker.terminate() == 0
    for (error,) in conn.execute("SELECT last_error FROM jobs WHERE id = ANY(%s)", (ids,)).fetchall():
        assert "names job(s) -1 that are not in this batch" in error, error


def test_a_durable_step_in_a_batch_is_refused_with_the_reason(conn, spawn_worker):
    (job_id,) = enqueue_many([("bev", {"step": True})])
    worker = spawn(spawn_worker, BATCH_SIZE="1")
    wait_for(lambda: scalar(conn, "SELECT status FROM jobs WHERE id = %s", (job_id,)) == "dead",
             timeout=60, message="the job dead")
    assert worker.terminate() == 0
    error = scalar(conn, "SELECT last_error FROM jobs WHERE id = %s", (job_id,))
    assert "a batch handler's jobs cannot use durable steps" in error, error


def test_sigkill_mid_batch_loses_no_job(conn, spawn_worker):
    ids = enqueue_many([("bev", {"n": i, **({"hang": 60} if i == 0 else {})}) for i in range(30)])
    first = spawn(spawn_worker, BATCH_SIZE="10", BATCH_WAIT="0.2")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE payload ? 'started'") > 0,
             timeout=60, message="a batch under way")
    first.kill()
    held = settle_killed(conn, first.pid)
    assert held, "the killed worker held the hanging batch's jobs"
    second = spawn(spawn_worker, BATCH_SIZE="10", BATCH_WAIT="0.2")
    wait_for(lambda: left(conn) == 0, timeout=120, message="every job run again after the kill")
    assert second.terminate() == 0
    # the books: every job succeeded (a job that hung once was reaped and ran again), and none is left
    done = runs(conn)
    assert sorted(done) == sorted(ids)
    assert all(any(ok for _, ok in job_runs) for job_runs in done.values())
    assert all(job_id in done and done[job_id][-1][1] for job_id in held)
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


def test_cancel_of_one_member_fails_it_alone(conn, spawn_worker):
    ids = enqueue_many([("bev", {"n": 0, "wait_cancel": True}), ("bev", {"n": 1}), ("bev", {"n": 2})])
    worker = spawn(spawn_worker, BATCH_SIZE="3", BATCH_WAIT="5", SKIPLOCK_HEARTBEAT_INTERVAL="0.5")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE payload ? 'started'") == 3,
             timeout=60, message="the batch under way")
    assert cancel.request_cancel(conn, ids[0], "tester").changed
    wait_for(lambda: left(conn) == 0, timeout=60, message="the batch ended")
    assert worker.terminate() == 0
    status, error = conn.execute("SELECT status, last_error FROM jobs WHERE id = %s", (ids[0],)).fetchone()
    assert status == "failed" and error == "cancelled by tester"
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = ANY(%s)", (ids[1:],)) == 0  # succeeded


def test_sigterm_gives_a_gathering_batch_back(conn, spawn_worker):
    worker = spawn(spawn_worker, BATCH_SIZE="100", BATCH_WAIT="600")
    wait_for(lambda: "starting" in worker.log(), timeout=60, message="the worker to start")
    ids = enqueue_many([("bev", {"n": i}) for i in range(3)])
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == 3,
             timeout=60, message="the jobs claimed into a batch")
    assert worker.terminate() == 0
    rows = conn.execute("SELECT status, attempts FROM jobs WHERE id = ANY(%s)", (ids,)).fetchall()
    assert rows == [("queued", 0)] * 3  # back at once, the attempt not counted, none ran
    assert scalar(conn, "SELECT count(*) FROM test_effects") == 0


def test_an_async_batch_handler_runs_its_batches(conn, spawn_worker):
    ids = enqueue_many([("abev", {"n": i, **({"fail": True} if i == 2 else {})}) for i in range(7)])
    worker = spawn(spawn_worker, SKIPLOCK_QUEUES="abev")
    wait_for(lambda: left(conn, "abev") == 0, timeout=60, message="the async batches handled")
    assert worker.terminate() == 0
    made = calls(conn, "abev")
    assert all(len(job_ids) <= 5 for job_ids in made.values()), made
    done = runs(conn, "abev")
    assert done[ids[2]] == [(1, False), (2, True)]
    assert all(done[j] == [(1, True)] for j in ids if j != ids[2])


def test_a_batch_that_outlives_its_leases_loses_its_acks_not_its_jobs(conn, spawn_worker):
    ids = enqueue_many([("bev", {"n": i, "hang": 6}) for i in range(3)])
    # no heartbeat: the 2 s leases expire while the call hangs, and the reaper takes the jobs back
    slow = spawn(spawn_worker, BATCH_SIZE="3", BATCH_WAIT="5", SKIPLOCK_HEARTBEAT_INTERVAL="0")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE payload ? 'started'") == 3,
             timeout=60, message="the batch under way")
    fast = spawn(spawn_worker, BATCH_SIZE="3", BATCH_WAIT="0.2")
    wait_for(lambda: left(conn) == 0 and all((1, True) in runs(conn).get(j, []) for j in ids),
             timeout=120, message="the jobs run again elsewhere, and the hanging call returned")
    wait_for(lambda: "lease lost before ack, result dropped" in slow.log(), timeout=60,
             message="the slow worker's acks dropped as stale")
    assert slow.terminate() == 0 and fast.terminate() == 0
    done = runs(conn)
    for job_id in ids:
        # the first run's success came after its lease was gone: its ack was dropped, and a later run
        # (a new attempt, whichever worker took it) is the one that finished the job
        assert any(attempt >= 2 and ok for attempt, ok in done[job_id]), done[job_id]
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0
