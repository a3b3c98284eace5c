"""The worker's claim never reads jobs whole, even planned from statistics of a nearly empty jobs.

Right after a vacuum that found the queue empty, PostgreSQL believes jobs empty whatever arrives
next (its statistics' rows per page times the pages it has now). Left to itself it then joined the
claim's UPDATE to the picked ids by hashing a sequential scan of all of jobs, or walked all of
jobs_pkey per picked id, or read every queued job through jobs_unique_inflight and sorted them,
for every claim until the next ANALYZE (in issue 19's latency curve at 11,500 jobs/s, ~2 s stalls
of every worker and whole runs collapsed, with PostgreSQL busy and the workers idle).
The claim statement (ids by `id = ANY`) and the claim connection's settings (state_changes.claim_session)
rule those plans out. The plans are read with auto_explain, sent to this client as notices; plan
shapes are asserted, never durations.
"""

from __future__ import annotations

import psycopg
import pytest

from skiplock.core import state_changes
from skiplock.core.plumbing.db import session_defaults
from skiplock.runtime.claimer import claims_commit_async
from skiplock.tools import bench_seed

CLAIMS = 8  # past psycopg's preparing (prepare_threshold=0 here) and PostgreSQL's 5 custom plans


def _explained_claims(conn: psycopg.Connection, claims: int) -> list[str]:
    """Run `claims` claims of 50 on `conn`; the plan each one ran with (auto_explain, as notices)."""
    plans: list[str] = []
    conn.add_notice_handler(lambda diag: plans.append(diag.message_primary or ""))
    for setting in ("log_min_duration = 0", "log_nested_statements = off", "log_level = notice"):
        conn.execute(f"SET auto_explain.{setting}")
    for _ in range(claims):
        jobs = state_changes.claim(conn, "w", ["t1"], [30.0], 50, payload_as_text=True, with_context=False)
        assert len(jobs) == 50
    return [p for p in plans if "Update on jobs" in p]


def _pkey_scans(plan: str) -> list[str]:
    """Each scan of jobs by its primary key in `plan`, with the line after it (its Index Cond, if any)."""
    lines = plan.splitlines()
    return [" ".join(lines[i:i + 2]) for i, line in enumerate(lines) if "Index Scan using jobs_pkey" in line]


def _nearly_empty(conn: psycopg.Connection) -> None:
    """jobs as a vacuum leaves it between bursts: one page, statistics that say 20 rows."""
    bench_seed.seed_ready_jobs(conn, "t1", 20)
    conn.execute("VACUUM ANALYZE jobs")


def _found_empty(conn: psycopg.Connection) -> None:
    """jobs as a vacuum that found the queue empty leaves it: no rows in its pages (no vacuum
    truncates jobs, migration 021), and the column statistics of the last ANALYZE, made earlier."""
    bench_seed.seed_ready_jobs(conn, "t1", 2_000)
    conn.execute("ANALYZE jobs")
    conn.execute("DELETE FROM jobs")
    conn.execute("VACUUM jobs")


@pytest.mark.parametrize("vacuumed", [_nearly_empty, _found_empty], ids=["nearly-empty", "found-empty"])
def test_claims_reach_jobs_by_index_after_a_vacuum_of_a_nearly_empty_queue(db_url, conn, vacuumed):
    vacuumed(conn)
    bench_seed.seed_ready_jobs(conn, "t1", 20_000)
    first = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id LIMIT %s", (50 * CLAIMS,))]
    with psycopg.connect(db_url, autocommit=True, prepare_threshold=0) as claims:
        session_defaults(claims)  # the worker's claim connection: a pooled one (JIT off), then its own settings
        claims_commit_async(claims)
        claims.execute("LOAD 'auto_explain'")
        plans = _explained_claims(claims, CLAIMS)
        # planned once and kept: a custom plan per claim cost more than the claim's execution
        assert claims.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                              " WHERE statement LIKE '%%FROM skiplock_limit_allowances(%%'"
                              " AND statement NOT LIKE '%%pg_prepared_statements%%'").fetchall() == [(CLAIMS, 0)]
    assert len(plans) == CLAIMS
    for plan in plans:
        assert "Seq Scan on jobs" not in plan, plan
        assert "Index Scan using jobs_ready_idx on jobs j" in plan, plan
        # "claimable now" (migrations/functions/skiplock_claimable.sql) is inlined: its quals are the walk's
        # own, no call of it is left (a call would hide jobs_ready_idx's predicate: a scan of all of jobs)
        nodes = "\n".join(line for line in plan.splitlines() if "Query Text:" not in line)
        assert "skiplock_claimable" not in nodes and "(status = 'queued'::job_status)" in nodes, plan
        # the claimed ids by key: a plan made while jobs looked empty walked all of jobs_pkey
        # per claim instead (335 ms per claim of 50 here; PostgreSQL 15, generic plan)
        assert _pkey_scans(plan) and all("Index Cond: (id = ANY" in scan for scan in _pkey_scans(plan)), plan
    # and they took the oldest jobs, in order, once each
    claimed = [r[0] for r in conn.execute("SELECT id FROM jobs WHERE status = 'running' ORDER BY id")]
    assert claimed == first


def test_without_those_settings_postgresql_did_read_jobs_whole(db_url, conn):
    """The case the settings are for, shown on this server: the same claims with the server's own
    planner settings read every queued row of jobs, by a walk of a whole index and a sort (if a
    future PostgreSQL stops doing so, this test says the settings may go)."""
    _found_empty(conn)
    bench_seed.seed_ready_jobs(conn, "t1", 20_000)
    with psycopg.connect(db_url, autocommit=True, prepare_threshold=0) as claims:
        claims.execute("LOAD 'auto_explain'")
        plans = _explained_claims(claims, 2)
    assert any("Seq Scan on jobs" in plan or "Index Scan using jobs_unique_inflight" in plan for plan in plans), plans
