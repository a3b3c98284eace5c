"""job.complete(conn) / job.complete_async(conn) on every kind of connection (issue 13, item 4).

A job claimed by a worker id, then completed inside the caller's transaction next to its business
row: the commit finishes both (respecting the history mode, counted in job_stats once); a run that
does not own the job any more gets JobOwnershipLost, and its rollback leaves the job running.
"""

from __future__ import annotations

import asyncio
import dataclasses

import psycopg
import pytest

from skiplock import JobOwnershipLost, enqueue
from skiplock.core import state_changes
from skiplock.core.job_context import JobContext
from tests.integration.test_user_transaction import ASYNC_KINDS, SYNC_KINDS, async_kind
from tests.support.helpers import scalar

WORKER = "test-host:1:complete"


def _claimed(conn: psycopg.Connection, history: str) -> JobContext:
    conn.execute("CREATE TABLE IF NOT EXISTS tx_results (job_id bigint NOT NULL, attempt int NOT NULL, "
                 "pid int NOT NULL)")
    job_id = enqueue("tx_complete", {"n": 1})
    [job] = state_changes.claim(conn, WORKER, ["tx_complete"], [30.0], 1)
    assert job.id == job_id
    assert job.priority is not None and job.run_at is not None
    assert job.created_at is not None and job.started_at is not None
    return JobContext(job.id, job.queue, job.attempts, job.max_attempts, job.priority, job.run_at,
                      job.created_at, job.started_at, job.unique_key, WORKER, history)


def _business_write(user_conn: object, job: JobContext) -> None:
    """The handler's own row, written through the caller's library (as an application would)."""
    from skiplock.core.plumbing import adapters

    adapters.run_sync(user_conn, "INSERT INTO tx_results (job_id, attempt, pid) VALUES (%(id)s, %(a)s, 0)",
                      {"id": job.id, "a": job.attempt})


def _assert_completed(conn: psycopg.Connection, job: JobContext, history: str) -> None:
    assert scalar(conn, "SELECT count(*) FROM tx_results WHERE job_id = %s", (job.id,)) == 1
    status = scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job.id,))
    assert status == ("succeeded" if history == "keep" else None)
    assert scalar(conn, "SELECT sum(completed) FROM job_stats WHERE queue = 'tx_complete'") == 1


def _assert_untouched(conn: psycopg.Connection, job: JobContext) -> None:
    assert scalar(conn, "SELECT count(*) FROM tx_results") == 0
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job.id,)) == "running"
    assert scalar(conn, "SELECT count(*) FROM job_stats WHERE queue = 'tx_complete'") == 0


@pytest.mark.parametrize("history", ["delete", "keep"])
@pytest.mark.parametrize("kind", list(SYNC_KINDS))
def test_complete_commits_with_the_business_write(kind: str, history: str, db_url: str,
                                                  conn: psycopg.Connection) -> None:
    job = _claimed(conn, history)
    with SYNC_KINDS[kind](db_url) as (user_conn, finish):
        _business_write(user_conn, job)
        job.complete(user_conn)
        assert job.completed_in_transaction
        finish(True)
    _assert_completed(conn, job, history)


@pytest.mark.parametrize("kind", list(SYNC_KINDS))
def test_complete_refused_when_the_run_lost_the_job(kind: str, db_url: str, conn: psycopg.Connection) -> None:
    job = _claimed(conn, "delete")
    stale = dataclasses.replace(job, attempt=job.attempt + 1, _completed=[])  # not this job's current run
    with SYNC_KINDS[kind](db_url) as (user_conn, finish):
        _business_write(user_conn, stale)
        with pytest.raises(JobOwnershipLost, match=f"job {job.id}: attempt 2 .* no longer owns it"):
            stale.complete(user_conn)
        assert not stale.completed_in_transaction
        finish(False)
    _assert_untouched(conn, job)


@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_complete_async_commits_or_is_refused(kind: str, db_url: str, conn: psycopg.Connection) -> None:
    job = _claimed(conn, "delete")
    stale = dataclasses.replace(job, worker_id="someone-else", _completed=[])

    async def scenario() -> None:
        async with async_kind(db_url, kind) as (user_conn, commit, rollback):
            with pytest.raises(JobOwnershipLost):
                await stale.complete_async(user_conn)
            await rollback()
        _assert_untouched(conn, job)
        async with async_kind(db_url, kind) as (user_conn, commit, rollback):
            from skiplock.core.plumbing import adapters

            await adapters.run_async(user_conn, "INSERT INTO tx_results (job_id, attempt, pid) "
                                                "VALUES (%(id)s, %(a)s, 0)", {"id": job.id, "a": job.attempt})
            await job.complete_async(user_conn)
            await commit()

    asyncio.run(scenario())
    _assert_completed(conn, job, "delete")
