"""The races a workflow must survive, each forced with two real connections, and a real worker.

- A child enqueued in an open transaction while its parent's ack commits (the ack cannot see the
  child's edge): the edge is checked again at the child's COMMIT and the child is released there.
- A parent's ack that comes while the child's COMMIT holds its check: the ack waits for the lock,
  and its settle (fresh snapshots) sees the committed edge.
- With a real worker process: a dependent starts without a polling delay (the ack's NOTIFY wakes
  the worker, SKIPLOCK_POLL_INTERVAL is 300 s), wait() is woken by the NOTIFY, progress reaches
  skiplock.status while the handler runs.
"""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg

import skiplock
from skiplock.core import state_changes
from tests.support.helpers import scalar, wait_for

WORKER = "race-host:1:w"


def _claim_one(conn: psycopg.Connection, queue: str) -> state_changes.ClaimedJob:
    [job] = state_changes.claim(conn, WORKER, [queue], [30.0], 1)
    return job


def test_child_enqueued_while_its_parent_is_acked_is_released_at_its_commit(db_url: str,
                                                                            conn: psycopg.Connection) -> None:
    parent = skiplock.enqueue("race_parent", {})
    job = _claim_one(conn, "race_parent")
    with psycopg.connect(db_url) as producer:
        child = skiplock.enqueue("race_child", {}, depends_on=[parent], conn=producer)  # not committed
        # the parent's ack commits now: it cannot see the uncommitted edge
        assert state_changes.ack_batch(conn, WORKER, [state_changes.Outcome(job.id, job.queue, job.attempts,
                                                                            "ok")]) == {parent}
        assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (child,)) == 0  # invisible yet
        producer.commit()  # the commit-time check finds the parent gone (succeeded) and releases the child
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (child,)) == "queued"
    assert scalar(conn, "SELECT parent_state::text FROM job_deps WHERE child = %s", (child,)) == "succeeded"


def test_an_ack_during_the_childs_commit_check_waits_for_it_and_then_releases(db_url: str,
                                                                            conn: psycopg.Connection) -> None:
    parent = skiplock.enqueue("race_parent", {})
    job = _claim_one(conn, "race_parent")
    acked: list[set[int]] = []
    with psycopg.connect(db_url) as producer:
        child = skiplock.enqueue("race_child", {}, depends_on=[parent], conn=producer)
        # run the commit-time check now: it takes FOR SHARE on the (running) parent until COMMIT
        producer.execute("SET CONSTRAINTS job_deps_check IMMEDIATE")

        def ack() -> None:
            with psycopg.connect(db_url, autocommit=True) as worker_conn:
                acked.append(state_changes.ack_batch(worker_conn, WORKER, [state_changes.Outcome(job.id, job.queue,
                                                                                                 job.attempts, "ok")]))

        acker = threading.Thread(target=ack)
        acker.start()
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                      "AND datname = current_database()") == 1,
                 timeout=30, message="the ack to wait for the child's check")
        assert acked == []
        producer.commit()
    acker.join(timeout=30)
    assert acked == [{parent}]
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (child,)) == "queued"


def test_a_real_worker_releases_dependents_at_once_and_wakes_wait(db_url: str, conn: psycopg.Connection,
                                                                  spawn_worker, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    slow = skiplock.enqueue("wf_slow", {"until": str(flag)})
    after = skiplock.enqueue("wf_cleanup", {}, depends_on=[slow])
    worker = spawn_worker(SKIPLOCK_TASKS="tests.support.workflow_handlers", SKIPLOCK_POLL_INTERVAL="300",
                          SKIPLOCK_HEARTBEAT_INTERVAL="0.5")
    # progress reported by the running handler reaches status() (written beside the heartbeat)
    wait_for(lambda: skiplock.status(slow).progress == 0.5, timeout=60, message="the progress of the running job")
    assert skiplock.status(slow).progress_message == "half way"
    assert skiplock.status(after).state == "waiting"

    results: list[object] = []
    waiter = threading.Thread(target=lambda: results.append(skiplock.wait(after, timeout=60)))
    waiter.start()
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM job_watchers WHERE job_id = %s", (after,)) == 1,
             timeout=30, message="wait() to register")
    flag.touch()
    waiter.join(timeout=60)
    # the dependent ran right after its parent, though the worker polls only every 300 s
    assert results == [{"states": {str(slow): "succeeded"}}]
    assert skiplock.result(slow) == "slept"
    assert worker.terminate() == 0
