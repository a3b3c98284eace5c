"""The pruner deletes finished jobs past retention, in bounded batches, and nothing else."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from skiplock.core import state_changes
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import make_pool
from skiplock.core.sql import queries
from skiplock.services.pruner import Pruner

JOBS_PRUNE_SQL = queries("jobs_prune")

HOUR = 3600.0
SETTINGS = load_settings(env={}, history_retention=HOUR, dead_retention=24 * HOUR)


@pytest.fixture
def pool(db_url: str) -> Iterator[ConnectionPool]:
    p = make_pool(db_url, "skiplock-test-pruner", size=2, open_wait=True)
    yield p
    p.close()


def make_jobs(conn: psycopg.Connection, count: int, status: str, age_hours: float | None) -> list[int]:
    """Insert `count` jobs in `status`; finished ones finished `age_hours` ago (a test factory)."""
    rows = conn.execute(
        """INSERT INTO jobs (queue, payload, status, finished_at, created_at, run_at, worker_id, lease_until)
           SELECT 'q' || (g %% 3), '{}'::jsonb, %(status)s::job_status,
                  CASE WHEN %(final)s THEN now() - make_interval(secs => %(age)s * 3600) END,
                  now() - interval '90 days', now() - interval '90 days',
                  CASE WHEN %(status)s = 'running' THEN 'w1' END,
                  CASE WHEN %(status)s = 'running' THEN now() - interval '1 day' END
             FROM generate_series(1, %(count)s) g RETURNING id""",
        {"status": status, "final": age_hours is not None, "age": age_hours or 0, "count": count}).fetchall()
    return [r[0] for r in rows]


def remaining(conn: psycopg.Connection) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM jobs").fetchall()}


def test_pruner_deletes_only_what_is_past_retention(conn, pool):
    old_ok = make_jobs(conn, 7, "succeeded", 2)
    new_ok = make_jobs(conn, 2, "succeeded", 0.5)
    old_failed = make_jobs(conn, 3, "failed", 2)
    young_dead = make_jobs(conn, 2, "dead", 2)  # past history retention, not dead retention
    old_dead = make_jobs(conn, 4, "dead", 48)
    queued = make_jobs(conn, 3, "queued", None)  # created 90 days ago, never touched
    running = make_jobs(conn, 2, "running", None)  # lease long expired: the reaper's, not ours
    pruner = Pruner(pool, SETTINGS, batch=2)
    assert pruner.run_once() == 7 + 3 + 4
    assert remaining(conn) == set(new_ok + young_dead + queued + running)
    assert not remaining(conn) & set(old_ok + old_failed + old_dead)
    assert pruner.run_once() == 0


def test_each_statement_deletes_at_most_one_batch(conn, pool):
    make_jobs(conn, 5, "dead", 48)
    assert state_changes.prune_finished(conn, "dead", 24 * HOUR, 2) == 2
    # a pass stops after max_batches statements; the rest waits for the next pass
    assert Pruner(pool, SETTINGS, batch=1, max_batches=2).run_once() == 2
    assert Pruner(pool, SETTINGS, batch=1, max_batches=2).run_once() == 1
    assert len(remaining(conn)) == 0
    with pytest.raises(ValueError, match="only finished jobs"):
        state_changes.prune_finished(conn, "queued", 0, 10)


def test_prune_statement_can_use_the_finished_index(conn):
    make_jobs(conn, 50, "succeeded", 2)
    conn.execute("ANALYZE jobs")
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN " + JOBS_PRUNE_SQL.prune_finished.replace("%(status)s", "'succeeded'")
            .replace("%(older_than)s", "3600").replace("%(limit)s", "10")).fetchall())
    assert "jobs_finished_idx" in plan


def test_stats_past_retention_fold_into_totals_and_metrics_never_go_down(conn, pool):
    """job_stats minutes past SKIPLOCK_STATS_RETENTION are deleted in batches; /metrics' counters stay the same."""
    from skiplock.monitor.metrics import STAT_TOTALS

    conn.execute("""INSERT INTO job_stats (minute, queue, worker_id, completed, retried, dead, reaped)
                    SELECT date_trunc('minute', now()) - make_interval(mins => m), 'q' || (m % 2), 'w', 3, 2, 1,
                           CASE WHEN m % 5 = 0 THEN 1 ELSE 0 END
                      FROM generate_series(1, 2500) m""")  # 2,500 minutes: about 41 hours back
    totals_before = sorted(conn.execute(STAT_TOTALS).fetchall())
    settings = load_settings(env={}, stats_retention=24 * HOUR)
    pruned = Pruner(pool, settings, batch=400).run_once()
    old = conn.execute("SELECT count(*) FROM job_stats WHERE minute < now() - interval '24 hours'").fetchone()[0]
    kept = conn.execute("SELECT count(*) FROM job_stats").fetchone()[0]
    assert old == 0 and kept == 24 * 60 - 1 and pruned == 2500 - kept
    assert sorted(conn.execute(STAT_TOTALS).fetchall()) == totals_before
    assert Pruner(pool, settings, batch=400).run_once() == 0  # a second pass finds nothing
    assert sorted(conn.execute(STAT_TOTALS).fetchall()) == totals_before


def test_payload_edits_are_kept_as_long_as_the_audit_trail(conn: psycopg.Connection, pool: ConnectionPool) -> None:
    """job_edits (migration 032) is the audit's evidence: the pruner drops rows past SKIPLOCK_AUDIT_RETENTION."""
    from skiplock.core.features import payload_edit

    for job_id in make_jobs(conn, 3, "dead", 1):
        with conn.transaction():
            seen = payload_edit.seen(conn, job_id)
            assert seen is not None
            payload_edit.edit_and_retry(conn, job_id, {"fixed": job_id}, seen.digest, "ops")
    # age two edits past a one-day retention (the server's clock cannot be moved)
    conn.execute("UPDATE job_edits SET at = now() - interval '2 days' WHERE id IN "
                 "(SELECT id FROM job_edits ORDER BY id LIMIT 2)")
    Pruner(pool, load_settings(env={}, audit_retention=86400.0), batch=1).run_once()
    kept = conn.execute("SELECT new_payload FROM job_edits").fetchall()
    assert len(kept) == 1 and kept[0][0] == {"fixed": max(r[0] for r in conn.execute("SELECT id FROM jobs"))}
