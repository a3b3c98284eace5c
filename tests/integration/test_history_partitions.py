"""SKIPLOCK_HISTORY_MODE=partitioned: successes move to monthly partitions; the contract holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from skiplock import enqueue_many
from skiplock.core import state_changes
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import make_pool
from skiplock.services.history import HistoryPartitions, add_months, month_start, partition_name
from tests.support.helpers import scalar, wait_for

SEED_INSERT = """
INSERT INTO jobs (queue, priority, run_at, unique_key, payload)
VALUES (%s, %s, coalesce(%s, now()), %s, %s)
ON CONFLICT (unique_key) WHERE status IN ('queued','running') DO NOTHING
RETURNING id
"""

SEED_BACKLOG = """
SELECT queue, count(*) FILTER (WHERE status='queued') AS ready,
count(*) FILTER (WHERE status='running') AS running
FROM jobs GROUP BY queue ORDER BY ready DESC
"""
SEED_LONG_RUNNERS = """
SELECT id, queue, now()-started_at AS runtime, attempts, worker_id
FROM jobs
WHERE status='running' AND lease_until > now()
ORDER BY runtime DESC LIMIT 50
"""
SEED_P99 = """
SELECT queue, percentile_disc(0.99) WITHIN GROUP (ORDER BY now()-run_at) AS p99_wait
FROM jobs WHERE status='queued' GROUP BY queue
"""


def test_setting_parses_and_keep_history_still_means_keep():
    assert load_settings({"SKIPLOCK_HISTORY_MODE": "partitioned"}).history == "partitioned"
    assert load_settings({"SKIPLOCK_KEEP_HISTORY": "true"}).history == "keep"
    assert load_settings({}).history == "delete"


def test_ack_moves_successes_to_history_in_one_statement(conn):
    ids = enqueue_many([("h1", {"i": i}) for i in range(3)])
    claimed = state_changes.claim(conn, "w-h", ["h1"], [30.0], 3)
    assert sorted(j.id for j in claimed) == ids
    written = state_changes.ack_batch(conn, "w-h", [
        state_changes.Outcome(ids[0], "h1", 1, "ok"), state_changes.Outcome(ids[1], "h1", 1, "ok"),
        state_changes.Outcome(ids[2], "h1", 1, "queued", delay=60, error="try again"),
    ], history="partitioned")
    assert written == set(ids)
    assert conn.execute("SELECT id, status FROM jobs").fetchall() == [(ids[2], "queued")]
    rows = conn.execute("SELECT id, status, payload, attempts, worker_id, finished_at IS NOT NULL, "
                        "tableoid::regclass::text FROM jobs_history ORDER BY id").fetchall()
    this_month = partition_name(month_start(datetime.now(UTC).date()))
    assert rows == [(ids[0], "succeeded", {"i": 0}, 1, "w-h", True, this_month),
                    (ids[1], "succeeded", {"i": 1}, 1, "w-h", True, this_month)]
    assert conn.execute("SELECT sum(completed), sum(retried) FROM job_stats").fetchone() == (2, 1)
    # the fence still holds: a second ack of the same ids writes nothing and moves nothing
    assert state_changes.ack_batch(conn, "w-h", [state_changes.Outcome(ids[0], "h1", 1, "ok")],
                                   history="partitioned") == set()
    assert scalar(conn, "SELECT count(*) FROM jobs_history") == 2


@pytest.mark.slow
def test_partitioned_mode_keeps_the_schema_contract(conn, spawn_worker):
    # a plain-SQL producer, exactly the seed's INSERT in its working form
    for i in range(20):
        conn.execute(SEED_INSERT, ("t1", i % 3, None, f"key-{i}", psycopg.types.json.Jsonb({"i": i})))
    assert conn.execute(SEED_INSERT, ("t1", 0, None, "key-0", psycopg.types.json.Jsonb({}))).fetchone() is None
    conn.execute(SEED_INSERT, ("t2", 0, datetime.now(UTC) + timedelta(hours=1), None,
                               psycopg.types.json.Jsonb({"later": True})))
    worker = spawn_worker(SKIPLOCK_HISTORY_MODE="partitioned")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs_history") == 20, timeout=60,
             message="20 successes moved to jobs_history")
    assert scalar(conn, "SELECT count(*) FROM test_effects") == 20
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 't1'") == 0
    # the seed's three observability queries run unchanged
    assert conn.execute(SEED_BACKLOG).fetchall() == [("t2", 1, 0)]
    assert conn.execute(SEED_LONG_RUNNERS).fetchall() == []
    [(queue, p99)] = conn.execute(SEED_P99).fetchall()
    assert queue == "t2" and p99 < timedelta(0)  # scheduled an hour ahead
    # a unique key is free again once its job finished (the row left jobs)
    assert conn.execute(SEED_INSERT, ("t1", 0, None, "key-0", psycopg.types.json.Jsonb({}))).fetchone()
    assert worker.terminate() == 0


def test_partitions_created_ahead_default_rows_moved_and_old_months_dropped(fresh_db_url):
    pool = make_pool(fresh_db_url, "skiplock-test-history", size=1, open_wait=True)
    try:
        with psycopg.connect(fresh_db_url, autocommit=True) as conn:
            now = datetime.now(UTC)
            this_month = month_start(now.date())
            far = add_months(this_month, 5)
            far_time = datetime(far.year, far.month, 10, tzinfo=UTC)
            # a row of a month without a partition lands in the default one (an ack never fails)
            conn.execute("INSERT INTO jobs_history (id, queue, priority, run_at, created_at, finished_at, "
                         "attempts, max_attempts, payload, status) "
                         "VALUES (1, 'q', 0, %s, %s, %s, 1, 20, '{}', 'succeeded')", (far_time,) * 3)
            assert scalar(conn, "SELECT tableoid::regclass::text FROM jobs_history") == "jobs_history_default"

            service = HistoryPartitions(pool, retention_seconds=7 * 86400)
            assert service.run_once(now).created == []  # the migration made this month and two ahead

            later = service.run_once(far_time)  # five months on: its month and two ahead are created
            assert later.created == [partition_name(add_months(far, n)) for n in range(3)]
            assert later.moved_from_default == 1
            assert scalar(conn, "SELECT tableoid::regclass::text FROM jobs_history") == partition_name(far)
            # months that ended more than the retention before far_time are dropped whole
            assert later.dropped == [partition_name(add_months(this_month, n)) for n in range(3)]
            assert service.run_once(far_time).created == [] and service.run_once(far_time).dropped == []
            assert scalar(conn, "SELECT count(*) FROM jobs_history") == 1
    finally:
        pool.close()
