"""The job's own log lines, with real workers: kept per attempt, from a sync handler's thread and an async
handler's task, bounded, absent for a handler that logs nothing, and kept by a run killed mid-way."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiplock import enqueue
from skiplock.core.features import job_logs
from skiplock.runtime.job_logs import MAX_LINES
from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for

ENV = {"SKIPLOCK_TASKS": "tests.support.logging_handlers", "PYTHONPATH": str(REPO),
       "SKIPLOCK_HEARTBEAT_INTERVAL": "0.2", "SKIPLOCK_POLL_INTERVAL": "0.1", "SKIPLOCK_HISTORY_MODE": "keep"}


def _logs(conn, job_id: int) -> list[dict]:
    return job_logs.of_job(conn, job_id)


def _finished(conn, *ids: int) -> bool:
    return scalar(conn, "SELECT count(*) FROM jobs WHERE id = ANY(%s) AND status IN ('succeeded', 'dead', 'failed')",
                  (list(ids),)) == len(ids)


@pytest.mark.slow
def test_each_attempt_keeps_its_handlers_lines(conn, spawn_worker) -> None:
    failing = enqueue("logs_sync", {"order": 41, "fail": True}, max_attempts=2)
    ok = enqueue("logs_sync", {"order": 42})
    async_job = enqueue("logs_async", {"order": 43})
    many = enqueue("logs_many", {"lines": MAX_LINES + 25})
    silent = enqueue("logs_none", {})
    spawn_worker(SKIPLOCK_BACKOFF_BASE="0", SKIPLOCK_QUEUES="logs_sync,logs_async,logs_many,logs_none", **ENV)
    wait_for(lambda: _finished(conn, failing, ok, async_job, many, silent), timeout=60, message="the jobs to finish")

    attempts = _logs(conn, failing)
    assert [a["attempt"] for a in attempts] == [1, 2]  # one row per attempt
    for a in attempts:
        lines = a["lines"].splitlines()
        assert "INFO shop.orders: charging order 41" in lines[0]
        assert "WARNING shop.orders: card declined once for order 41, trying again" in lines[1]
        assert "ERROR shop.orders: second try failed" in lines[2]
        assert "ValueError: gateway said no" in a["lines"]  # the traceback is part of the record
        assert "from a side thread" not in a["lines"]  # another thread's records are not the run's
        assert "skiplock" not in a["lines"]  # nor the worker's own
        assert a["line_count"] == 3 and a["dropped"] == 0

    [a_ok] = _logs(conn, ok)
    assert "charging order 42" in a_ok["lines"] and "order 41" not in a_ok["lines"]
    [a_async] = _logs(conn, async_job)
    assert a_async["lines"].count("\n") == 1 and "async start 43" in a_async["lines"] \
        and "async done 43" in a_async["lines"]
    [a_many] = _logs(conn, many)
    assert (a_many["line_count"], a_many["dropped"]) == (MAX_LINES, 25)
    assert a_many["lines"].splitlines()[-1].endswith(f"line {MAX_LINES - 1}")
    assert _logs(conn, silent) == []  # a handler that logs nothing writes nothing
    assert [r["job_id"] for r in job_logs.find(conn, "CARD DECLINED", 10)] == [ok, failing]


@pytest.mark.slow
def test_a_killed_run_keeps_what_it_logged_until_its_last_heartbeat(conn, spawn_worker, tmp_path: Path) -> None:
    job = enqueue("logs_then_hang", {"order": 7})
    worker = spawn_worker(SKIPLOCK_QUEUES="logs_then_hang", **ENV)
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (job,)) == 1,
             timeout=60, message="the handler to start")
    wait_for(lambda: _logs(conn, job) != [], timeout=30, message="a heartbeat to write the lines")
    worker.kill()
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job,)) == "running"
    [kept] = _logs(conn, job)
    assert kept["attempt"] == 1 and "step one of 7 done" in kept["lines"] and kept["line_count"] == 1
