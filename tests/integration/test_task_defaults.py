"""@task options reach jobs enqueued by a process that does not import the task module (issue 35, defect 10).

A web process enqueues by queue name; only the worker imports the tasks. `@task("reports",
max_attempts=2)` used to be lost there: the job was written with 20 and showed 1/20. The worker now
keeps its tasks' enqueue-time options (max_attempts, version, lock_key) in `task_defaults`, and such a
producer writes them into its jobs; a lock_key computed by a function it cannot run is refused.
"""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from skiplock import EnqueueError, enqueue, enqueue_async, enqueue_many
from skiplock.core import task_defaults
from skiplock.core.producer_async import close_default_async_pool
from skiplock.core.registry import REGISTRY
from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for

pytestmark = pytest.mark.slow

TASKS = """
from skiplock import task


@task("td_reports", max_attempts=2, version=2, upgrade={1: lambda old: {"month": old}}, lock_key="td-serial")
def build_report(payload):
    raise RuntimeError("the report server is down")


@task("td_emails", max_attempts=3)
def send_email(payload):
    pass


@task("td_accounts", lock_key=lambda payload: f"account-{payload['account']}")
def sync_account(payload):
    pass
"""


@pytest.fixture
def worker_tasks(conn: psycopg.Connection, spawn_worker, tmp_path: Path) -> Iterator[None]:
    """A worker that imports the task module; this test process never does."""
    (tmp_path / "td_tasks.py").write_text(textwrap.dedent(TASKS))
    # succeeded jobs stay in `jobs` (history mode keep), so their rows can be read after they ran
    worker = spawn_worker(SKIPLOCK_TASKS="td_tasks", PYTHONPATH=f"{REPO}:{tmp_path}", SKIPLOCK_BACKOFF_BASE="0",
                          SKIPLOCK_BACKOFF_CAP="0", SKIPLOCK_HISTORY_MODE="keep")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM task_defaults WHERE queue LIKE 'td_%%'") == 3, timeout=60,
             message="the worker to write its tasks' options")
    assert REGISTRY.get("td_reports") is None  # the producer here really lacks the task
    task_defaults.forget()
    yield
    task_defaults.forget()
    worker.terminate()


def _job(conn: psycopg.Connection, job_id: int) -> tuple:
    row = conn.execute("SELECT max_attempts, version, lock_key FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return tuple(row)


def test_a_producer_without_the_task_writes_its_options(worker_tasks: None, conn: psycopg.Connection) -> None:
    job_id = enqueue("td_reports", {"month": "2026-10"})
    assert _job(conn, job_id) == (2, 2, "td-serial")
    # the worker ends it after the task's 2 attempts, not 20
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)) == "dead", timeout=60,
             message="the job dead after its task's attempts")
    assert scalar(conn, "SELECT attempts FROM jobs WHERE id = %s", (job_id,)) == 2
    # what the caller gives still wins
    assert _job(conn, enqueue("td_emails", {"to": "a@example.com"}, max_attempts=9, delay=3600)) == (9, 1, None)


def test_enqueue_many_both_paths_and_enqueue_async(worker_tasks: None, conn: psycopg.Connection) -> None:
    few = enqueue_many([("td_emails", {"n": n}) for n in range(3)] + [{"queue": "td_reports", "payload": {},
                                                                      "delay": 3600}])
    many = enqueue_many({"queue": "td_emails", "payload": {"n": n}, "priority": -1} for n in range(60))  # COPY
    assert {_job(conn, i) for i in few[:3] + many} == {(3, 1, None)}
    assert _job(conn, few[3]) == (2, 2, "td-serial")

    async def produce() -> int | None:
        try:
            return await enqueue_async("td_reports", {"month": "2026-11"}, delay=3600)
        finally:
            await close_default_async_pool()

    async_id = asyncio.run(produce())
    assert async_id is not None and _job(conn, async_id) == (2, 2, "td-serial")


def test_a_lock_key_function_the_producer_cannot_run_is_refused(worker_tasks: None,
                                                                conn: psycopg.Connection) -> None:
    with pytest.raises(EnqueueError, match=r"computes lock_key from the payload.*pass lock_key="):
        enqueue("td_accounts", {"account": 7})
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'td_accounts'") == 0
    job_id = enqueue("td_accounts", {"account": 7}, lock_key="account-7")
    assert _job(conn, job_id) == (20, 1, "account-7")


def test_queues_no_worker_has_described_keep_the_defaults(conn: psycopg.Connection) -> None:
    task_defaults.forget()
    assert _job(conn, enqueue("td_nobody", {"a": 1})) == (20, 1, None)
