"""A running job's stack on request, with real workers: `skiplock jobs stack ID` asks, the worker that runs
the job takes its handler's stack (a sync handler's thread, an async handler's task), and the named function
the handler sleeps in is in it; the request is audited; a job that does not run has no stack."""

from __future__ import annotations

import subprocess
import sys

import pytest

from skiplock import enqueue
from tests.conftest import REPO, worker_env
from tests.support.helpers import scalar, wait_for

# a long heartbeat: the stack must come sooner than the next one (the worker answers about once a second)
ENV = {"SKIPLOCK_TASKS": "tests.support.logging_handlers", "PYTHONPATH": str(REPO),
       "SKIPLOCK_HEARTBEAT_INTERVAL": "20", "SKIPLOCK_POLL_INTERVAL": "0.1"}


def cli(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skiplock.tools.cli", *args], cwd=REPO, env=worker_env(db_url),
                          capture_output=True, text=True, timeout=60)


def _started(conn, job: int) -> bool:
    return scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (job,)) == 1


@pytest.mark.slow
def test_the_cli_prints_the_stack_of_a_sync_and_an_async_handler(conn, db_url, spawn_worker) -> None:
    sync_job = enqueue("stack_sync", {"seconds": 120})
    async_job = enqueue("stack_async", {"seconds": 120})
    spawn_worker(SKIPLOCK_QUEUES="stack_sync,stack_async", **ENV)
    wait_for(lambda: _started(conn, sync_job) and _started(conn, async_job), timeout=60,
             message="both handlers to start")

    shown = cli(db_url, "jobs", "stack", str(sync_job), "--wait", "15", "--as", "oncall")
    assert shown.returncode == 0, shown.stderr
    header, *stack = shown.stdout.splitlines()
    assert header.startswith(f"job {sync_job}, attempt 1, on ") and "(most recent call last)" in header
    # the handler's own frames, innermost last: the named function it sleeps in, called from the handler
    frames = [line for line in stack if line.startswith("  File ")]
    assert "in stack_sync" in frames[-2] and "in wait_for_the_gateway" in frames[-1], stack
    assert "time.sleep(0.05)" in shown.stdout

    shown = cli(db_url, "jobs", "stack", str(async_job), "--wait", "15")
    assert shown.returncode == 0, shown.stderr
    assert "in stack_async" in shown.stdout and "in await_the_slow_api" in shown.stdout, shown.stdout
    assert shown.stdout.index("in stack_async") < shown.stdout.index("in await_the_slow_api")

    assert scalar(conn, "SELECT count(*) FROM audit_log WHERE action = 'show stack'") == 2
    assert scalar(conn, "SELECT actor FROM audit_log WHERE action = 'show stack' ORDER BY id LIMIT 1") == "oncall"
    # read-only: the jobs still run, as they were
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = ANY(%s) AND status = 'running'",
                  ([sync_job, async_job],)) == 2


@pytest.mark.slow
def test_a_job_that_does_not_run_has_no_stack(conn, db_url) -> None:
    queued = enqueue("stack_sync", {}, delay=3600)
    refused = cli(db_url, "jobs", "stack", str(queued), "--wait", "1")
    assert refused.returncode == 1
    assert refused.stdout.strip() == f"job {queued} is queued, not running: it has no stack to show"
    assert cli(db_url, "jobs", "stack", "987654", "--wait", "1").stdout.strip() == "job 987654 does not exist"
    assert scalar(conn, "SELECT count(*) FROM job_stacks") == 0
