"""The 7-day charts read job_stats summed per hour (migration 033) and show what the minutes show.

A real worker runs jobs that succeed, retry and die; its per-minute stats are then copied back in time
(as the same run 3 hours and 2 days ago would have left them). The pruner's
pass rolls the closed hours up; the overview's 7-day chart and the queue's 7-day failure rate are the
same before and after, the current hour still comes from the minutes, and a second pass adds nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from skiplock import enqueue_many
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import make_pool
from skiplock.services.pruner import Pruner
from tests.support.helpers import scalar, wait_for

WORKER = {"SKIPLOCK_QUEUES": "t2", "SKIPLOCK_BACKOFF_BASE": "0.05", "SKIPLOCK_BACKOFF_CAP": "0.05",
          "SKIPLOCK_POLL_INTERVAL": "0.05"}
# every title of the overview's charts ("<bucket> UTC t2: 4 succeeded") and the failure-rate bars
CHART_TITLE = re.compile(r"<title>([^<]*UTC [^<]*)</title>")
FIGURE = re.compile(r'id="failure-rate" data-failures="(\d+)" data-runs="(\d+)"')


@pytest.fixture
def pool(db_url: str) -> Iterator[ConnectionPool]:
    p = make_pool(db_url, "skiplock-test-rollup", size=2, open_wait=True)
    yield p
    p.close()


def _run_jobs(conn: Any, spawn_worker: Any, runs_so_far: int) -> int:
    """4 succeed, 2 fail once then succeed, 2 die: 10 runs, 4 failed; returns the runs job_stats then holds."""
    enqueue_many([("t2", {"n": i}) for i in range(4)]
                 + [{"queue": "t2", "payload": {"fail_times": 1, "n": i}, "max_attempts": 3} for i in range(2)]
                 + [{"queue": "t2", "payload": {"permanent": True, "n": i}} for i in range(2)])
    worker = spawn_worker(**WORKER)
    wait_for(lambda: scalar(conn, "SELECT coalesce(sum(completed + retried + dead), 0) FROM job_stats")
             == runs_so_far + 10, timeout=60, message="the worker to finish every job")
    worker.terminate()
    return runs_so_far + 10


def _seven_days(admin: Any) -> tuple[list[str], tuple[str, ...]]:
    overview = admin.get("/?range=7d").get_data(as_text=True)
    queue = admin.get("/queues/t2?range=7d").get_data(as_text=True)
    figure = FIGURE.search(queue)
    assert figure, queue
    return CHART_TITLE.findall(overview) + CHART_TITLE.findall(queue), figure.groups()


def test_seven_day_charts_read_the_hourly_rollup_with_the_same_numbers(admin: Any, conn: Any, spawn_worker: Any,
                                                                       pool: ConnectionPool) -> None:
    runs = _run_jobs(conn, spawn_worker, 0)
    # the same run as it would have been 3 hours and 2 days ago, in a database upgraded to migration
    # 033 whose pruner has not run yet (the worker's own pruner may have made the watermark meanwhile)
    conn.execute("INSERT INTO job_stats (minute, queue, worker_id, completed, retried, failed, dead) "
                 "SELECT minute - ago, queue, worker_id, completed, retried, failed, dead FROM job_stats, "
                 "unnest(ARRAY[interval '3 hours', interval '2 days']) ago")
    conn.execute("TRUNCATE job_stats_rollup, job_stats_hourly")
    runs *= 3
    before = _seven_days(admin)
    assert before[1] == ("12", "30"), before  # 3 runs of 10, 4 failed in each
    assert scalar(conn, "SELECT count(*) FROM job_stats_hourly") == 0

    Pruner(pool, load_settings(env={})).run_once()
    # the closed hours are summed per hour and queue; the current hour is left to the minutes
    until = scalar(conn, "SELECT until FROM job_stats_rollup")
    assert scalar(conn, "SELECT until <= now() - interval '5 minutes' AND until > now() - interval '65 minutes' "
                        "FROM job_stats_rollup")
    assert scalar(conn, "SELECT sum(completed + retried + dead) FROM job_stats_hourly") == 20
    assert scalar(conn, "SELECT count(*) FROM job_stats_hourly WHERE hour >= %s", (until,)) == 0
    assert conn.execute("SELECT hour, sum(completed), sum(retried), sum(dead) FROM job_stats_hourly GROUP BY 1 "
                        "ORDER BY 1").fetchall() == conn.execute(
        "SELECT date_bin('1 hour', minute, timestamptz '2000-01-01 00:00+00') AS h, sum(completed), sum(retried), "
        "sum(dead) FROM job_stats WHERE minute < %s GROUP BY 1 ORDER BY 1", (until,)).fetchall()
    assert _seven_days(admin) == before

    # a second pass adds nothing; a run after the rollup is counted from its minutes
    Pruner(pool, load_settings(env={})).run_once()
    assert scalar(conn, "SELECT sum(completed + retried + dead) FROM job_stats_hourly") == 20
    _run_jobs(conn, spawn_worker, runs)
    assert _seven_days(admin)[1] == ("16", "40")


def test_hourly_rows_past_the_stats_retention_are_pruned(conn: Any, pool: ConnectionPool) -> None:
    conn.execute("INSERT INTO job_stats_hourly (hour, queue, completed) VALUES "
                 "(date_bin('1 hour', now() - interval '9 days', timestamptz '2000-01-01'), 't2', 5), "
                 "(date_bin('1 hour', now() - interval '7 days', timestamptz '2000-01-01'), 't2', 7)")
    Pruner(pool, load_settings(env={"SKIPLOCK_STATS_RETENTION": str(8 * 86400)})).run_once()
    assert conn.execute("SELECT completed FROM job_stats_hourly").fetchall() == [(7,)]
