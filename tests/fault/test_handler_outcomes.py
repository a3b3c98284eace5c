"""Handlers that return odd values or raise BaseException subclasses, and SIGINT.

The job must be recorded correctly (ok, retried or dead with the reason) and the worker must stay
up; SIGINT must shut it down cleanly with exit status 0, handing unfinished jobs back.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from skiplock import enqueue
from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for

ODD_TASKS = '''
import asyncio
from skiplock import task

class Unprintable:
    def __repr__(self):
        raise RuntimeError("repr exploded")

@task("odd")
def odd(payload):
    kind = payload["kind"]
    if kind == "generator":
        return (i for i in range(3))
    if kind == "object":
        return Unprintable()
    if kind == "cycle":
        d = {}
        d["self"] = d
        return d
    if kind == "huge":
        return "x" * 5_000_000
    if kind == "false":
        return False
    if kind == "coroutine":
        async def later():
            raise AssertionError("an un-awaited coroutine never runs")
        return later()
    return None
'''


def status_of(conn, job_id: int) -> str | None:
    return scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["KeyboardInterrupt", "SystemExit"])
def test_handler_raising_base_exception_is_a_failed_attempt(kind, conn, spawn_worker):
    job = enqueue("t1", {"raise_base": kind}, max_attempts=2)
    worker = spawn_worker(SKIPLOCK_BACKOFF_BASE="0.05", SKIPLOCK_BACKOFF_CAP="0.1", SKIPLOCK_POLL_INTERVAL="0.1")
    wait_for(lambda: status_of(conn, job) == "dead", timeout=60, message="the job dead after two attempts")
    attempts, error = conn.execute("SELECT attempts, last_error FROM jobs WHERE id = %s", (job,)).fetchone()
    assert attempts == 2
    assert kind in error
    # the worker is still up and still working
    after = enqueue("t1", {"ok": True})
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (after,)) == 1,
             timeout=30, message="a later job to run")
    assert worker.proc.poll() is None
    assert worker.terminate() == 0


@pytest.mark.slow
def test_odd_return_values_are_ignored_and_the_job_succeeds(conn, spawn_worker, tmp_path: Path):
    (tmp_path / "odd_tasks.py").write_text(ODD_TASKS)
    kinds = ["generator", "object", "cycle", "huge", "false", "none"]
    ids = {kind: enqueue("odd", {"kind": kind}, max_attempts=1) for kind in kinds}
    coroutine = enqueue("odd", {"kind": "coroutine"}, max_attempts=1)
    worker = spawn_worker(SKIPLOCK_TASKS="tests.support.handlers,odd_tasks", PYTHONPATH=f"{tmp_path}:{REPO}")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')") == 0,
             timeout=60, message="every odd job to finish")
    # a return value means nothing to skiplock: each of these ran to the end, so each succeeded
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = ANY(%s)", (list(ids.values()),)) == 0
    # a coroutine returned un-awaited means the work never ran: that is not a success
    status, error = conn.execute("SELECT status::text, last_error FROM jobs WHERE id = %s", (coroutine,)).fetchone()
    assert status == "dead"
    assert "coroutine" in error
    assert worker.proc.poll() is None
    assert worker.terminate() == 0


@pytest.mark.slow
def test_sigint_on_an_idle_worker_exits_0(conn, spawn_worker):
    worker = spawn_worker()
    wait_for(lambda: "starting" in worker.log(), timeout=30, message="the worker to start")
    worker.proc.send_signal(signal.SIGINT)
    assert worker.proc.wait(timeout=60) == 0
    assert "Traceback" not in worker.log()


@pytest.mark.slow
def test_sigint_with_a_job_in_flight_releases_it_and_exits_0(conn, spawn_worker):
    job = enqueue("t1", {"sleep": 60})
    worker = spawn_worker(SKIPLOCK_SHUTDOWN_GRACE="0.5")
    wait_for(lambda: status_of(conn, job) == "running", timeout=30, message="the job to be claimed")
    worker.proc.send_signal(signal.SIGINT)
    assert worker.proc.wait(timeout=60) == 0
    # handed back at once, and the interrupted run does not count against the job
    status, attempts, owner = conn.execute("SELECT status::text, attempts, worker_id FROM jobs WHERE id = %s",
                                           (job,)).fetchone()
    assert (status, attempts, owner) == ("queued", 0, None)
    assert "Traceback" not in worker.log()
