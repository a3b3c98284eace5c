"""The worker's claim never scans jobs whole, even planned from statistics of a nearly empty jobs.

Right after a vacuum that found the queue empty, PostgreSQL believes jobs empty whatever arrives
next (its statistics' rows per page times the pages it has now). Left to itself it then joined the
claim's UPDATE to the picked ids by hashing a sequential scan of all of jobs, for every claim until
the next ANALYZE (in issue 19's latency curve at 11,500 jobs/s, a ~2 s stall of every worker came
right after such a vacuum, with PostgreSQL busy and the workers idle).
The claim connection's settings (core.claim_session) rule that plan out. The plans are read with
auto_explain, sent to this client as notices; plan shapes are asserted, never durations.
"""

from __future__ import annotations

import psycopg

from skiplock.core import core
from skiplock.runtime.runner import _claims_commit_async

CLAIMS = 8  # past psycopg's preparing (prepare_threshold=0 here) and PostgreSQL's 5 custom plans


def _explained_claims(conn: psycopg.Connection, claims: int) -> list[str]:
    """Run `claims` claims of 50 on `conn`; the plan each one ran with (auto_explain, as notices)."""
    plans: list[str] = []
    conn.add_notice_handler(lambda diag: plans.append(diag.message_primary or ""))
    for setting in ("log_min_duration = 0", "log_nested_statements = off", "log_level = notice"):
        conn.execute(f"SET auto_explain.{setting}")
    for _ in range(claims):
        jobs = core.claim(conn, "w", ["t1"], [30.0], 50, payload_as_text=True, with_context=False)
        assert len(jobs) == 50
    return [p for p in plans if "Update on jobs" in p]


def test_claims_reach_jobs_by_index_after_a_vacuum_of_a_nearly_empty_queue(db_url, conn):
    # jobs as a vacuum leaves it between bursts: one page, statistics that say 20 rows; then a backlog
    core.seed_ready_jobs(conn, "t1", 20)
    conn.execute("VACUUM ANALYZE jobs")
    core.seed_ready_jobs(conn, "t1", 20_000)
    first = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id LIMIT %s", (50 * CLAIMS,))]
    with psycopg.connect(db_url, autocommit=True, prepare_threshold=0) as claims:
        _claims_commit_async(claims)
        claims.execute("LOAD 'auto_explain'")
        plans = _explained_claims(claims, CLAIMS)
    assert len(plans) == CLAIMS
    for plan in plans:
        assert "Seq Scan on jobs" not in plan, plan
        assert "Index Scan using jobs_ready_idx on jobs j" in plan, plan
    # and they took the oldest jobs, in order, once each
    claimed = [r[0] for r in conn.execute("SELECT id FROM jobs WHERE status = 'running' ORDER BY id")]
    assert claimed == first


def test_without_those_settings_postgresql_did_scan_jobs_whole(db_url, conn):
    """The case the settings are for, shown on this server: the same claims with the server's own
    planner settings hash a sequential scan of jobs (if a future PostgreSQL stops doing so, this
    test says the setting may go)."""
    core.seed_ready_jobs(conn, "t1", 20)
    conn.execute("VACUUM ANALYZE jobs")
    core.seed_ready_jobs(conn, "t1", 20_000)
    with psycopg.connect(db_url, autocommit=True, prepare_threshold=0) as claims:
        claims.execute("LOAD 'auto_explain'")
        plans = _explained_claims(claims, 2)
    assert any("Seq Scan on jobs" in plan for plan in plans), plans
