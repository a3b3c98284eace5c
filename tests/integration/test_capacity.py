"""`skiplock capacity`: per-job costs read from a real server's counters after a real worker's drain."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest

from skiplock import enqueue_many
from skiplock.monitor.capacity import Costs, costs, project, snapshot
from tests.conftest import REPO, TEST_TABLES_SQL
from tests.support.helpers import scalar, wait_for
from tests.support.pgcluster import ThrowawayCluster

JOBS = 400


@pytest.fixture(scope="module")
def stats_cluster() -> Iterator[ThrowawayCluster]:
    """A private server with pg_stat_statements preloaded (the shared one is not reconfigured)."""
    cluster = ThrowawayCluster()
    try:
        cluster.reconfigure({"shared_preload_libraries": "pg_stat_statements"})
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def stats_db(stats_cluster: ThrowawayCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    import uuid

    name = f"cap_{uuid.uuid4().hex[:8]}"
    url = stats_cluster.migrated_database(name, TEST_TABLES_SQL + "CREATE EXTENSION pg_stat_statements;")
    monkeypatch.setenv("DATABASE_URL", url)
    yield url
    from skiplock.core.producer import close_default_pool

    close_default_pool()


def drain_measured(url: str, spawn_worker) -> Costs:
    with psycopg.connect(url, autocommit=True) as conn:
        before = snapshot(conn)
        enqueue_many([("t1", {"no_effect": True}) for _ in range(JOBS)], conn=conn)
        worker = spawn_worker(url=url, SKIPLOCK_CONCURRENCY="4")
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, timeout=60, message="the drain")
        # the workers' histograms reach the table with their heartbeat, every few seconds
        wait_for(lambda: snapshot(conn).handler_runs - before.handler_runs >= JOBS, timeout=30,
                 message="the handler histogram to be saved")
        # each backend sends its table counters within PGSTAT_IDLE_INTERVAL (10 s) of going idle:
        # a job's row is updated once by its claim and deleted by its ack, two dead tuples per job
        wait_for(lambda: snapshot(conn).dead_tuples - before.dead_tuples >= 2 * JOBS, timeout=30,
                 message="the server's table counters to include every claim and ack")
        measured = costs(before, snapshot(conn))
        assert worker.terminate() == 0
    return measured


def test_costs_per_job_from_pg_stat_statements(stats_db, spawn_worker):
    c = drain_measured(stats_db, spawn_worker)
    assert c.jobs == JOBS and c.enqueued == JOBS
    for kind in ("enqueue", "claim", "ack"):
        assert 0 < c.server_ms[kind] < 50, c.server_ms
    # a job's row is updated once by its claim and deleted by its ack: two dead tuples
    assert 1.9 <= c.dead_tuples_per_job <= 3, c.dead_tuples_per_job
    assert c.wal_bytes_per_job > 100
    # one enqueue_many, and claims and acks in batches: far fewer statements than jobs
    assert 0 < c.statements_per_job < 0.5, c.statements_per_job
    assert 0 <= c.handler_ms < 50


def test_without_pg_stat_statements_the_server_time_is_unknown_but_the_rest_is_measured(db_url, spawn_worker):
    c = drain_measured(db_url, spawn_worker)
    assert c.server_ms == {} and math.isnan(c.server_ms_per_job)
    assert 2 <= c.dead_tuples_per_job <= 3
    assert project(c, db_cores=2).jobs_per_s_at_80 is None


def test_littles_law_sizes_the_workers():
    c = Costs(seconds=60, jobs=6000, enqueued=6000, server_ms={"enqueue": 0.05, "claim": 0.02, "ack": 0.03},
              handler_ms=50.0, concurrency=10, workers=2)
    p = project(c, db_cores=4, target_rate=1000)
    assert p.busy_slots == pytest.approx(50)  # 1000 jobs/s x 0.05 s
    assert p.processes == 7  # 50 slots / (10 per process at 80%) = 6.25
    assert p.jobs_per_s_at_80 == pytest.approx(0.8 * 4 / 0.0001)


def test_capacity_command_prints_json(db_url):
    from skiplock import enqueue_many

    enqueue_many([("t3", {}) for _ in range(50)])  # a backlog with nobody on it: one worker to start
    out = subprocess.run([sys.executable, "-m", "skiplock.tools.cli", "capacity", "--seconds", "0.2", "--json",
                          "--target-rate", "100"], cwd=REPO, capture_output=True, text=True, timeout=60,
                         env={"DATABASE_URL": db_url, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    assert figures["measured"]["jobs"] == 0 and figures["projection"]["target_rate"] == 100
    assert figures["desired_workers"] == {"t3": 1}
