"""Cancelling a running job from the CLI: a real worker, a sync handler looping on
job.cancel_requested, the job ending failed "cancelled by <who>"; a cancel after the end is a no-op."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from skiplock import enqueue
from tests.conftest import REPO, worker_env
from tests.support.helpers import scalar, wait_for

CANCEL_TASKS = '''
import asyncio
import time
from skiplock import task
from tests.support.handlers import record_effect


@task("long")
def long_running(payload, job):
    record_effect(job, payload)  # the test waits for this: the handler is running
    deadline = time.monotonic() + 120  # bounded: never outlives the test
    while not job.cancel_requested and time.monotonic() < deadline:
        time.sleep(0.05)  # a unit of the handler's work


@task("long_raising")
def long_raising(payload, job):
    record_effect(job, payload)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job.check_cancelled()  # raises Cancelled once the request is seen
        time.sleep(0.05)


@task("along")
async def long_async(payload, job):
    record_effect(job, payload)
    await asyncio.sleep(120)  # cancelled at the heartbeat after the request, long before this ends
'''


def cli(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    # `python -m skiplock` is the worker; the CLI is the `skiplock` console script's module
    return subprocess.run([sys.executable, "-m", "skiplock.tools.cli", *args], cwd=REPO, env=worker_env(db_url),
                          capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_cli_cancels_a_running_sync_handler(conn, db_url, spawn_worker, tmp_path: Path) -> None:
    (tmp_path / "cancel_tasks.py").write_text(CANCEL_TASKS)
    job = enqueue("long", {}, max_attempts=5)
    queued = enqueue("long", {}, delay=3600)
    worker = spawn_worker(SKIPLOCK_TASKS="cancel_tasks", PYTHONPATH=f"{tmp_path}:{REPO}",
                          SKIPLOCK_HEARTBEAT_INTERVAL="0.2", SKIPLOCK_POLL_INTERVAL="0.1")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (job,)) == 1,
             timeout=60, message="the handler to start")

    asked = cli(db_url, "jobs", "cancel", str(job), "--as", "tester")
    assert asked.returncode == 0, asked.stderr
    assert "cancel requested" in asked.stdout
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job,)) == "failed",
             timeout=60, message="the cancelled job to end failed")
    error, attempts, who = conn.execute("SELECT last_error, attempts, cancel_requested_by FROM jobs WHERE id = %s",
                                        (job,)).fetchone()
    assert (error, attempts, who) == ("cancelled by tester", 1, "tester")

    # after the end: nothing changes, and the answer says so (exit status 1)
    again = cli(db_url, "jobs", "cancel", str(job))
    assert again.returncode == 1
    assert again.stdout.strip() == f"job {job} already finished (failed): nothing changed"
    assert scalar(conn, "SELECT last_error FROM jobs WHERE id = %s", (job,)) == "cancelled by tester"
    missing = cli(db_url, "jobs", "cancel", "987654")
    assert missing.returncode == 1 and "does not exist" in missing.stdout
    # a queued job is cancelled at once and never runs
    now = cli(db_url, "jobs", "cancel", str(queued))
    assert now.returncode == 0 and "was queued: cancelled" in now.stdout
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (queued,)) == "failed"

    # a handler that asks to be interrupted: check_cancelled() raises, the job ends the same way
    raising = enqueue("long_raising", {}, max_attempts=5)
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (raising,)) == 1,
             timeout=60, message="the raising handler to start")
    assert cli(db_url, "jobs", "cancel", str(raising), "--as", "tester").returncode == 0
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (raising,)) == "failed",
             timeout=60, message="the raising handler's job to end failed")
    assert scalar(conn, "SELECT last_error FROM jobs WHERE id = %s", (raising,)) == "cancelled by tester"
    assert worker.terminate() == 0


@pytest.mark.slow
def test_cli_cancels_a_running_async_handler_and_audits_it(conn, db_url, spawn_worker, tmp_path: Path) -> None:
    (tmp_path / "cancel_tasks.py").write_text(CANCEL_TASKS)
    spawn_worker(SKIPLOCK_TASKS="cancel_tasks", PYTHONPATH=f"{tmp_path}:{REPO}", SKIPLOCK_HEARTBEAT_INTERVAL="0.2")
    job = enqueue("along", {"n": 1})
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (job,)) == 1,
             timeout=60, message="the async handler to start")
    asked = cli(db_url, "jobs", "cancel", str(job), "--as", "tester")
    assert asked.returncode == 0, asked.stderr
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job,)) == "failed",
             timeout=60, message="the async handler's task to be cancelled")
    assert scalar(conn, "SELECT last_error FROM jobs WHERE id = %s", (job,)) == "cancelled by tester"
    assert scalar(conn, "SELECT attempts FROM jobs WHERE id = %s", (job,)) == 1
    row = conn.execute("SELECT actor, role, action, count, detail FROM audit_log").fetchall()
    assert row == [("tester", "cli", "cancel job", 1, {"ids": [job]})]
