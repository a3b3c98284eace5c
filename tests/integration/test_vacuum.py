"""The worker vacuums jobs itself once dead rows pile up (services/vacuum.py).

Autovacuum is turned off for the jobs table while each test runs (`no_autovacuum`), so every vacuum
counted here is skiplock's own, and no autovacuum clears the dead rows a test has just made before
its `run_once()` reads them: with it on (a throwaway cluster's default), 10,000 inserted rows alone
start one within its naptime, whenever that falls. The dead rows are made the way the product makes
them: jobs enqueued through the public API, claimed and acked (the ack deletes them), or run by a
real worker process.
"""

from __future__ import annotations

import os

import psycopg
import pytest
from psycopg import conninfo
from psycopg_pool import ConnectionPool

from skiplock import enqueue_many
from skiplock.core import state_changes
from skiplock.core.plumbing.db import make_pool
from skiplock.core.status import OutcomeStatus
from skiplock.services.vacuum import DUTY, LIVE_SHARE, VACUUM_LOCK_CLASS, JobsVacuum
from skiplock.tools import bench_seed
from tests.support.helpers import scalar, wait_for

VACUUMS = "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass"
DEAD = "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass"
LIVE = "SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass"


class Clock:
    """The readings the duty cycle will see, in order: each pass reads the clock to decide, and a
    vacuum reads it at its start and end and once more to set the next allowed start."""

    def __init__(self, *readings: float) -> None:
        self.readings = list(readings)

    def __call__(self) -> float:
        return self.readings.pop(0)


@pytest.fixture(autouse=True)
def no_autovacuum(conn: psycopg.Connection):
    conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
    yield
    conn.execute("ALTER TABLE jobs RESET (autovacuum_enabled)")


@pytest.fixture
def pool(db_url: str):
    p = make_pool(db_url, "skiplock-test-vacuum", size=1)
    yield p
    p.close()


def _dead_rows(conn: psycopg.Connection, n: int) -> None:
    """`n` jobs enqueued, claimed and acked (deleted): 2n dead rows, once the stats show them."""
    enqueue_many([("t1", {"n": i}) for i in range(n)])
    jobs = state_changes.claim(conn, "w", ["t1"], [30.0], n)
    state_changes.ack_batch(conn, "w", [state_changes.Outcome(j.id, j.queue, j.attempts,
                                                              OutcomeStatus.OK) for j in jobs])
    conn.execute("SELECT pg_stat_force_next_flush()")  # this backend's counts, at its next transaction's end
    conn.execute("SELECT 1")
    wait_for(lambda: scalar(conn, DEAD) >= n, message=f"{n} dead rows in pg_stat_user_tables")


def test_past_the_threshold_a_pass_vacuums_jobs_and_the_dead_rows_are_gone(conn, pool):
    _dead_rows(conn, 300)
    before = scalar(conn, VACUUMS)
    done = JobsVacuum(pool, dead_rows=200).run_once()
    assert done is not None and done.dead_rows >= 300
    assert scalar(conn, VACUUMS) == before + 1
    assert scalar(conn, DEAD) == 0


@pytest.mark.slow  # 8-25 s each (fuzzing, a second cluster, a subprocess suite): the full run, not the edit-test loop
def test_a_big_table_waits_for_a_share_of_its_live_rows_more(conn, pool):
    """A vacuum reads every index whole, so 10,000 live rows raise a threshold of 200 by 500 (LIVE_SHARE)."""
    assert LIVE_SHARE == 0.05
    bench_seed.seed_ready_jobs(conn, "t2", 10_000)  # live, and left alone: the claims below take t1 only
    _dead_rows(conn, 300)
    wait_for(lambda: scalar(conn, LIVE) >= 10_000, message="10,000 live rows in pg_stat_user_tables")
    before = scalar(conn, VACUUMS)
    assert scalar(conn, DEAD) < 700
    assert JobsVacuum(pool, dead_rows=200).run_once() is None
    _dead_rows(conn, 300)
    wait_for(lambda: scalar(conn, DEAD) >= 1200, message="1,200 dead rows")
    assert JobsVacuum(pool, dead_rows=200).run_once() is not None
    assert scalar(conn, VACUUMS) == before + 1


def test_under_the_threshold_or_turned_off_nothing_runs(conn, pool):
    _dead_rows(conn, 100)
    before = scalar(conn, VACUUMS)
    assert JobsVacuum(pool, dead_rows=10_000).run_once() is None
    assert JobsVacuum(pool, dead_rows=0).run_once() is None  # SKIPLOCK_VACUUM_DEAD_ROWS=0
    assert scalar(conn, VACUUMS) == before


def test_one_worker_at_a_time_and_a_duty_cycle_between_vacuums(conn, pool):
    _dead_rows(conn, 300)
    before = scalar(conn, VACUUMS)
    # another worker is vacuuming: this one leaves it
    with psycopg.connect(conn.info.dsn, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, 0)", (VACUUM_LOCK_CLASS,))
        assert JobsVacuum(pool, dead_rows=200).run_once() is None
    assert scalar(conn, VACUUMS) == before
    # a vacuum that took 1 s (1000 -> 1001) leaves 3 s (DUTY 0.25) before the next may start
    assert DUTY == 0.25
    clock = Clock(1000.0, 1000.0, 1001.0, 1001.0, 1003.9, 1004.1, 1004.1, 1004.2, 1004.2)
    vacuum = JobsVacuum(pool, dead_rows=200, clock=clock)
    assert vacuum.run_once() is not None
    assert vacuum.not_before == 1004.0
    _dead_rows(conn, 300)
    assert vacuum.run_once() is None  # 1003.9: too soon, not even the dead rows are read
    assert vacuum.run_once() is not None  # 1004.1
    assert clock.readings == []
    assert scalar(conn, VACUUMS) == before + 2


def test_behind_a_transaction_pooler_no_session_lock_is_taken(conn, pool):
    """A session lock through PgBouncer's transaction pooling could stay on a server connection other
    clients use: there the vacuum takes none (SKIP_LOCKED alone keeps vacuums apart)."""
    _dead_rows(conn, 300)
    before = scalar(conn, VACUUMS)
    with psycopg.connect(conn.info.dsn, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, 0)", (VACUUM_LOCK_CLASS,))
        assert JobsVacuum(pool, dead_rows=200, advisory_lock=False).run_once() is not None
        # let it go here: a closed connection's backend may linger a moment in pg_locks, still holding it
        other.execute("SELECT pg_advisory_unlock(%s, 0)", (VACUUM_LOCK_CLASS,))
    assert scalar(conn, VACUUMS) == before + 1
    # pg_locks is the whole server's: other tests' workers (pytest-xdist) may be vacuuming their own databases
    held = ("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s::bigint::oid "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
    assert scalar(conn, held, (VACUUM_LOCK_CLASS,)) == 0


def test_a_role_that_does_not_own_jobs_leaves_it_to_autovacuum(db_url, conn, caplog):
    role = f"skiplock_worker_{os.getpid()}"
    conn.execute(f"DROP ROLE IF EXISTS {role}")
    conn.execute(f"CREATE ROLE {role} LOGIN")
    try:
        conn.execute(f"GRANT SELECT, UPDATE, DELETE ON jobs TO {role}")
        _dead_rows(conn, 300)
        before = scalar(conn, VACUUMS)
        pool = ConnectionPool(conninfo.make_conninfo(db_url, user=role), min_size=1, max_size=1,
                              kwargs={"autocommit": True}, open=True)
        try:
            vacuum = JobsVacuum(pool, dead_rows=200)
            with caplog.at_level("INFO", logger="skiplock.vacuum"):
                assert vacuum.run_once() is None
                assert vacuum.run_once() is None  # asked once, said once
            assert vacuum.allowed is False
            assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
            assert "does not own" in caplog.records[0].message
        finally:
            pool.close()
        assert scalar(conn, VACUUMS) == before
    finally:
        conn.execute(f"REASSIGN OWNED BY {role} TO CURRENT_USER")
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


def test_a_real_worker_vacuums_the_jobs_it_ran(conn, spawn_worker):
    """Two worker processes run 3,000 jobs enqueued through the public API; with autovacuum off for
    jobs (no_autovacuum), jobs is vacuumed by them, and every job ran once."""
    before = scalar(conn, VACUUMS)
    workers = [spawn_worker(SKIPLOCK_VACUUM_DEAD_ROWS="1000", SKIPLOCK_QUEUES="t1") for _ in range(2)]
    enqueue_many([("t1", {"n": i}) for i in range(3000)])
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, timeout=120, message="every job done")
    wait_for(lambda: scalar(conn, VACUUMS) > before, timeout=30, message="a vacuum of jobs by a worker")
    assert scalar(conn, "SELECT coalesce(sum(completed), 0) FROM job_stats WHERE queue = 't1'") == 3000
    for w in workers:
        assert w.terminate() == 0, w.log()


def test_no_vacuum_truncates_the_hot_tables(conn):
    """Migration 021: a truncation's ACCESS EXCLUSIVE lock stalled every claim (README)."""
    rows = conn.execute("SELECT relname, reloptions FROM pg_class WHERE relname IN ('jobs', 'queue_waiters') "
                        "ORDER BY relname").fetchall()
    assert [(name, "vacuum_truncate=false" in (options or [])) for name, options in rows] == [
        ("jobs", True), ("queue_waiters", True)]


@pytest.mark.parametrize("raw", ["-1", "lots", "1.5"])
def test_a_bad_dead_rows_setting_is_refused_with_its_name(raw):
    from skiplock.core.errors import ConfigError
    from skiplock.core.plumbing.config import load_settings

    with pytest.raises(ConfigError, match="SKIPLOCK_VACUUM_DEAD_ROWS"):
        load_settings({"SKIPLOCK_VACUUM_DEAD_ROWS": raw})
    assert load_settings({"SKIPLOCK_VACUUM_DEAD_ROWS": "0"}).vacuum_dead_rows == 0
