"""The ack is planned once per connection, and that one plan probes jobs by id (state_changes.row_writes_session).

Left to itself PostgreSQL plans an ack for its values on every call while that custom plan is
estimated cheaper than the generic one (which counts on 10 ids per array), as for acks of a few
jobs, or it settles on a generic plan made while jobs was nearly empty: a scan of jobs per id, kept
after a backlog arrives. The first test fails with either setting left out (checked by hand).
Plan counters and plan shapes are asserted, never durations.
"""

from __future__ import annotations

import psycopg
import pytest

from skiplock import enqueue_many
from skiplock.core import state_changes
from skiplock.core.status import HistoryMode, OutcomeStatus
from tests.support.helpers import worker_pool_settings

ACKS = 12  # psycopg prepares on the 6th run; PostgreSQL's own choice takes 5 custom plans after that
PREPARED = ("SELECT name, statement, generic_plans, custom_plans, cardinality(parameter_types) "
            "FROM pg_prepared_statements ORDER BY name")


def _small_batches(conn: psycopg.Connection, rows: psycopg.Connection, history: str) -> None:
    """ACKS rounds of the row writers' statements on `rows`, each batch of the few jobs that PostgreSQL
    re-planned: a heartbeat, then an ack of one success, one retry (its error recorded) and one snooze."""
    for _ in range(ACKS):
        jobs = state_changes.claim(conn, "w", ["t1"], [30.0], 3)
        assert state_changes.heartbeat(rows, "w", [j.id for j in jobs], [30.0] * 3) == {j.id for j in jobs}
        ok, retry, snooze = (state_changes.Outcome(j.id, j.queue, j.attempts, OutcomeStatus.OK) for j in jobs)
        outcomes = [ok, retry._replace(status=OutcomeStatus.RETRY, delay=60.0, error="boom"),
                    snooze._replace(status=OutcomeStatus.SNOOZED, delay=60.0)]
        assert state_changes.ack_batch(rows, "w", outcomes, history=history) == {j.id for j in jobs}


@pytest.mark.parametrize("history", list(HistoryMode))
def test_row_writes_are_planned_once_as_probes_by_id_even_on_a_nearly_empty_jobs(db_url, conn, history):
    enqueue_many([("t1", {"n": i}) for i in range(3 * ACKS)])
    # jobs as a vacuum leaves it between bursts: one page, and statistics that say so
    conn.execute("VACUUM ANALYZE jobs")
    with psycopg.connect(db_url, autocommit=True) as rows:
        state_changes.row_writes_session(rows)
        _small_batches(conn, rows, history)
        prepared = rows.execute(PREPARED).fetchall()
        # the heartbeat, the ack, its attempt history and the snooze
        assert len(prepared) == 4, [p[1] for p in prepared]
        for name, statement, generic, custom, parameters in prepared:
            # every run since psycopg prepared it used the one generic plan: none was planned for its values
            assert (generic, custom) == (ACKS - 5, 0), statement
            # the plan kept for the connection's life: EXPLAIN EXECUTE shows it without running it, and
            # a generic plan does not look at the values, so NULLs will do
            nulls = ", ".join(["NULL"] * parameters)
            plan = "\n".join(r[0] for r in rows.execute(f"EXPLAIN (COSTS off) EXECUTE {name}({nulls})"))
            assert "Seq Scan" not in plan, plan
            # each id found through the primary key, then its row touched by ctid (`f`, core/sql/jobs_running.sql)
            assert "Index Scan using jobs_pkey on jobs x" in plan and "Tid Scan on jobs j" in plan, plan


@pytest.mark.parametrize("prepared", ["on", "off", "on, behind a pooler"])
def test_the_worker_acks_on_a_connection_with_those_settings_unless_behind_pgbouncer(db_url, conn, monkeypatch,
                                                                                     prepared):
    # Behind PgBouncer in transaction mode no session setting is made: it would leak to other
    # clients' transactions. Its signs: prepared statements off, or a direct URL apart from the
    # pooled one (PgBouncer >= 1.21 keeps prepared statements on).
    settings = ("SELECT current_setting('plan_cache_mode'), current_setting('enable_seqscan'), "
                "current_setting('jit')")
    server = conn.execute(settings).fetchone()
    monkeypatch.setenv("SKIPLOCK_PREPARED_STATEMENTS", prepared.split(",")[0])
    if "pooler" in prepared:  # the same server under another spelling stands in for the direct URL
        monkeypatch.setenv("SKIPLOCK_DIRECT_URL", db_url + ("&" if "?" in db_url else "?") + "connect_timeout=9")
    monkeypatch.setenv("SKIPLOCK_POLL_INTERVAL", "0.1")
    found = worker_pool_settings(conn, "rows_pool", settings)
    assert found == (("force_generic_plan", "off", "off") if prepared == "on" else server)
