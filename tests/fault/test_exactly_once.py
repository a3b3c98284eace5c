"""Exactly-once completion for database side effects (issue 13, item 4).

A handler writes its result and calls job.complete(conn) in the same transaction
(tests/support/tx_handlers.py). Workers are SIGKILLed at random points, many times; at the end every job
is done and every job's row exists exactly once. A run that lost its lease to another worker
cannot commit its row.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from skiplock import enqueue_many
from tests.support.helpers import scalar, wait_for

TABLES = """
CREATE TABLE IF NOT EXISTS tx_results (job_id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL);
CREATE TABLE IF NOT EXISTS tx_lost (job_id bigint NOT NULL, attempt int NOT NULL);
"""
TASKS = "tests.support.handlers,tests.support.tx_handlers"
JOBS = 150
KILLS = 30


def _results(conn: psycopg.Connection) -> int:
    return scalar(conn, "SELECT count(*) FROM tx_results")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_sigkill_at_random_points_never_doubles_or_loses_a_result(
        db_url: str, conn: psycopg.Connection, spawn_worker: Callable[..., Any]) -> None:
    conn.execute(TABLES)
    rng = random.Random(13)
    # each handler pauses 0-20 ms inside its transaction, between its write and the completion
    ids = enqueue_many([("tx_once", {"pause": rng.choice([0, 0.005, 0.01, 0.02])}) for _ in range(JOBS)])
    settings = {"SKIPLOCK_TASKS": TASKS, "SKIPLOCK_QUEUES": "tx_once", "SKIPLOCK_LEASE_SECONDS": "2",
                "SKIPLOCK_REAPER_INTERVAL": "0.2", "SKIPLOCK_CONCURRENCY": "4"}
    kills = 0
    for _ in range(KILLS):
        before = _results(conn)
        if before >= JOBS - 10:
            break  # leave work for the last, unkilled worker
        worker = spawn_worker(**settings)
        # kill after a random number of committed results: mid-batch, mid-transaction, mid-ack
        target = before + rng.randint(1, 6)
        wait_for(lambda: _results(conn) >= target, timeout=60, message=f"{target} results")  # noqa: B023 (wait_for calls it within this iteration)
        worker.kill()
        kills += 1
    last = spawn_worker(**settings)
    try:
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'tx_once'") == 0,
                 timeout=120, message="every job done")
    except AssertionError as timed_out:  # say what was left, and in what state, and what the worker said
        left = conn.execute("SELECT status::text, attempts, count(*) FROM jobs WHERE queue = 'tx_once' "
                            "GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
        raise AssertionError(f"{timed_out}; left (status, attempts, jobs): {left}; "
                             f"the last worker's log ends: {last.log()[-1500:]}") from None
    # the worker left the completed jobs to their handlers' transactions: it did not ack them a
    # second time (such an ack would find no row and be counted a stale ack)
    assert last.terminate() == 0
    stopped = re.search(r"stopped: (\d+) ok, \d+ retried, \d+ dead, (\d+) stale acks", last.log())
    assert stopped is not None, last.log()[-2000:]
    assert int(stopped.group(1)) >= 1 and stopped.group(2) == "0"

    assert kills >= 15
    rows = conn.execute("SELECT job_id, count(*) FROM tx_results GROUP BY job_id").fetchall()
    assert sorted(job_id for job_id, _ in rows) == sorted(ids)  # every job's row exists...
    assert [job_id for job_id, n in rows if n != 1] == []  # ...exactly once
    # the completions were counted once each, in the same transactions
    assert scalar(conn, "SELECT sum(completed) FROM job_stats WHERE queue = 'tx_once'") == JOBS
    # the kills did interrupt runs: some jobs only finished on a later attempt
    assert scalar(conn, "SELECT count(*) FROM tx_results WHERE attempt > 1") >= 1


@pytest.mark.slow
def test_a_run_that_lost_its_job_to_another_worker_cannot_commit(
        db_url: str, conn: psycopg.Connection, spawn_worker: Callable[..., Any]) -> None:
    conn.execute(TABLES)
    [job_id] = enqueue_many([("tx_slow", {})])
    # worker A never heartbeats, so its 1 s lease (tx_slow's) runs out while attempt 1 waits
    spawn_worker(SKIPLOCK_TASKS=TASKS, SKIPLOCK_QUEUES="tx_slow", SKIPLOCK_HEARTBEAT_INTERVAL="0",
                 SKIPLOCK_CONCURRENCY="1", SKIPLOCK_PREFETCH="0", SKIPLOCK_REAPER_INTERVAL="0.2")
    first_worker = wait_for(lambda: scalar(conn, "SELECT worker_id FROM jobs WHERE id = %s AND attempts = 1",
                                           (job_id,)), message="attempt 1 running on worker A")
    spawn_worker(SKIPLOCK_TASKS=TASKS, SKIPLOCK_QUEUES="tx_slow", SKIPLOCK_REAPER_INTERVAL="0.2")

    wait_for(lambda: scalar(conn, "SELECT count(*) FROM tx_lost") == 1, timeout=60,
             message="attempt 1's completion refused")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (job_id,)) == 0,
             message="the job completed by its later attempt")
    assert conn.execute("SELECT job_id, attempt FROM tx_lost").fetchall() == [(job_id, 1)]
    # only the later attempt's row committed; attempt 1's was rolled back with its refused completion
    results = conn.execute("SELECT job_id, attempt FROM tx_results").fetchall()
    assert len(results) == 1 and results[0][0] == job_id and results[0][1] >= 2
    later_pid = scalar(conn, "SELECT pid FROM tx_results")
    assert str(later_pid) not in first_worker.split(":")  # worker ids are host:pid:random
