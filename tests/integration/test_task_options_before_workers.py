"""@task options hold for jobs enqueued before any worker ran, and for batch members.

The Flask tutorial enqueues its first job before it has ever started a worker: no worker has yet
described its tasks (task_defaults is empty), and the producer does not import the task module.
That job used to keep the default 20 attempts, about 8 hours of retries, whatever @task said; batch
members ignored the workers' options even once they were described. Here a real worker starts only
after the enqueue, on a database no worker has ever used, and must end the job after the task's
2 attempts; the caller's own options still win over the task's.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import skiplock
from skiplock import enqueue, enqueue_many
from skiplock.core import task_defaults
from skiplock.core.registry import REGISTRY
from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for

pytestmark = pytest.mark.slow

TASKS = """
from skiplock import task


@task("fd_flaky", max_attempts=2)
def flaky(payload):
    raise RuntimeError("the mail server is down")


@task("fd_report", version=3, lock_key="fd-serial")
def report(payload):
    pass


@task("fd_account", lock_key=lambda payload: f"account-{payload['account']}")
def account(payload):
    pass


@task("fd_done")
def done(payload):
    pass
"""


@pytest.fixture
def start_worker(spawn_worker, tmp_path: Path) -> Iterator[Callable[[], object]]:
    """Start, when the test says so, a worker that imports the task module this process never does."""
    (tmp_path / "fd_tasks.py").write_text(textwrap.dedent(TASKS))
    task_defaults.forget()

    def start() -> object:
        # succeeded jobs stay in `jobs` (history mode keep), so their rows can be read after they ran
        return spawn_worker(SKIPLOCK_TASKS="fd_tasks", PYTHONPATH=f"{REPO}:{tmp_path}", SKIPLOCK_BACKOFF_BASE="0",
                            SKIPLOCK_BACKOFF_CAP="0", SKIPLOCK_HISTORY_MODE="keep")
    yield start
    task_defaults.forget()


def _status(conn: psycopg.Connection, job_id: int) -> str:
    return str(scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)))


def _wait_dead(conn: psycopg.Connection, job_id: int) -> None:
    wait_for(lambda: _status(conn, job_id) == "dead", timeout=90, message=f"job {job_id} dead after its attempts")


def _options(conn: psycopg.Connection, job_id: int) -> tuple:
    row = conn.execute("SELECT max_attempts, version, lock_key FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return tuple(row)


def test_options_hold_for_jobs_enqueued_before_any_worker_ran(start_worker, conn: psycopg.Connection) -> None:
    assert scalar(conn, "SELECT count(*) FROM task_defaults") == 0  # no worker has ever described a task here
    assert REGISTRY.get("fd_flaky") is None  # and this producer does not import the tasks
    flaky = enqueue("fd_flaky", {"to": "a@example.com"})
    bulk = enqueue_many([("fd_flaky", {"n": n}) for n in range(3)])
    report = enqueue("fd_report", {"month": "2026-11"}, delay=3600)
    account = enqueue("fd_account", {"account": 7}, delay=3600)
    mine = enqueue("fd_flaky", {"to": "b@example.com"}, max_attempts=3)  # the caller's own option
    given = enqueue("fd_report", {"month": 1}, version=1, lock_key="mine", delay=3600)

    start_worker()
    for job_id in (flaky, *bulk, mine):
        _wait_dead(conn, job_id)
    assert [scalar(conn, "SELECT attempts FROM jobs WHERE id = %s", (i,)) for i in (flaky, *bulk)] == [2] * 4
    assert _options(conn, flaky)[0] == 2
    assert scalar(conn, "SELECT attempts FROM jobs WHERE id = %s", (mine,)) == 3
    assert _options(conn, report) == (20, 3, "fd-serial")
    assert _options(conn, account) == (20, 1, "account-7")
    assert _options(conn, given) == (20, 1, "mine")


def test_batch_members_take_the_tasks_options(start_worker, conn: psycopg.Connection) -> None:
    start_worker()
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM task_defaults WHERE queue LIKE 'fd_%%'") == 4, timeout=60,
             message="the worker to describe its tasks")
    task_defaults.forget()  # a producer that has never looked them up
    with skiplock.batch(on_complete=("fd_done", {"batch": "flaky"})) as b:
        members = b.enqueue_many([("fd_flaky", {"n": n}) for n in range(2)])
        held = b.enqueue("fd_report", {"month": 2}, delay=3600)
    assert _options(conn, held) == (20, 3, "fd-serial")
    for job_id in members:
        _wait_dead(conn, job_id)
    assert [scalar(conn, "SELECT attempts FROM jobs WHERE id = %s", (i,)) for i in members] == [2, 2]
