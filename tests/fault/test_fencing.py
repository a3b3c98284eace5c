"""The ack fence, at the level of single statements (two real connections, no worker process).

Shown here: an ack from a worker that lost its job to another worker is refused, and so is a
late ack of an earlier attempt when the *same* worker has re-claimed its own reaped job: the
fence names the worker and the attempt.
"""

from __future__ import annotations

import psycopg

from skiplock import enqueue
from skiplock.core import state_changes
from tests.support.helpers import scalar, wait_for


def claim_one(conn: psycopg.Connection, worker_id: str, lease: float) -> state_changes.ClaimedJob:
    jobs = state_changes.claim(conn, worker_id, ["t1"], [lease], 1)
    assert len(jobs) == 1
    return jobs[0]


def expire_and_reap(conn: psycopg.Connection, job_id: int) -> None:
    wait_for(lambda: scalar(conn, "SELECT lease_until < now() FROM jobs WHERE id = %s", (job_id,)),
             timeout=10, message="the lease to expire")
    assert [r[0] for r in state_changes.reap_expired(conn)] == [job_id]


def test_late_ack_from_a_replaced_worker_is_refused(conn, db_url):
    job = enqueue("t1", {})
    claim_one(conn, "worker-a", 0.1)
    expire_and_reap(conn, job)
    with psycopg.connect(db_url, autocommit=True) as other:
        claim_one(other, "worker-b", 30)
    written = state_changes.ack_batch(conn, "worker-a", [state_changes.Outcome(job, "t1", 1, "ok")], history="delete")
    assert written == set()
    assert conn.execute("SELECT status::text, worker_id FROM jobs WHERE id = %s", (job,)).fetchone() == (
        "running", "worker-b")


def test_late_ack_of_an_earlier_attempt_by_the_same_worker_is_refused(conn):
    job = enqueue("t1", {})
    claim_one(conn, "worker-a", 0.1)
    expire_and_reap(conn, job)
    second = claim_one(conn, "worker-a", 30)  # the same process claims it again: attempt 2 now runs
    assert second.attempts == 2
    stale = state_changes.Outcome(job, "t1", 1, "queued", delay=0, error="attempt 1 failed late")
    written = state_changes.ack_batch(conn, "worker-a", [stale], history="delete")
    # attempt 1's failure must not send the job back to queued while attempt 2 still runs
    assert written == set()
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job,)) == "running"
