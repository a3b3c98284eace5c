"""`skiplock doctor`: every check shown passing and failing against a real PostgreSQL.

The shared CI server runs with autovacuum off (its conf.d/90-ci.conf), which the table check
rightly fails; the passing run of that check and of the whole command uses a private cluster
with stock settings.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from skiplock import enqueue, enqueue_many
from skiplock.core.plumbing.config import load_settings
from skiplock.monitor.doctor import (
    CHECKS,
    FAIL,
    JOBS_SETTINGS,
    OK,
    WARN,
    check_claim_plan,
    check_connections,
    check_long_transactions,
    check_table_health,
    check_throughput,
    run_checks,
)
from skiplock.runtime.latency import LatencyRecorder
from skiplock.tools.cli import main
from tests.support.helpers import wait_for
from tests.support.pgcluster import ThrowawayCluster


@pytest.fixture(scope="module")
def stock_db_url() -> Iterator[str]:
    """A migrated database on a private cluster with PostgreSQL's stock settings (autovacuum on)."""
    cluster = ThrowawayCluster()
    try:
        yield cluster.migrated_database("doctor")
    finally:
        cluster.destroy()


@pytest.mark.slow  # 8-25 s each (fuzzing, a second cluster, a subprocess suite): the full run, not the edit-test loop
def test_claim_plan_passes_with_the_index_and_fails_without(conn, fresh_db_url):
    settings = load_settings()
    assert check_claim_plan(conn, settings).status == OK
    with psycopg.connect(fresh_db_url, autocommit=True) as other:
        other.execute("DROP INDEX jobs_ready_idx")
        check = check_claim_plan(other, settings)
    assert check.status == FAIL
    assert "jobs_ready_idx" in check.verdict and "CREATE INDEX" in check.action
    assert not any(d["index"] == "jobs_ready_idx" for d in check.details)


def test_long_transactions_pass_then_warn_then_fail(conn, db_url):
    settings = load_settings()
    assert check_long_transactions(conn, settings, max_age=60).status == OK
    with psycopg.connect(db_url, application_name="forgetful-app") as holder:  # not autocommit
        holder.execute("SELECT txid_current()")  # a transaction with an xid, left open
        pid = holder.info.backend_pid
        warn = wait_for(lambda: (c := check_long_transactions(conn, settings, max_age=60)).status == WARN and c,
                        timeout=10, message="the idle-in-transaction session to show")
        assert warn  # a Check (wait_for returns the truthy value)
        assert [(d["pid"], d["application"]) for d in warn.details] == [(pid, "forgetful-app")]
        # the same transaction judged against a zero-second limit: it holds back vacuum
        fail = check_long_transactions(conn, settings, max_age=0)
        assert fail.status == FAIL
        assert fail.details[0]["pid"] == pid and fail.details[0]["state"].startswith("idle in transaction")
        assert "pg_terminate_backend" in fail.action
        holder.rollback()
    assert check_long_transactions(conn, settings, max_age=0).status == OK


def test_table_check_fails_when_autovacuum_is_off(conn):
    check = check_table_health(conn, load_settings())
    server_autovacuum = conn.execute("SHOW autovacuum").fetchone()[0]
    if server_autovacuum == "on":  # not the CI server: switch it off for jobs alone
        conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
        check = check_table_health(conn, load_settings())
        conn.execute("ALTER TABLE jobs RESET (autovacuum_enabled)")
    assert check.status == FAIL
    assert "Autovacuum is off" in check.verdict


def test_table_check_passes_warns_on_dead_tuples_and_missing_settings(stock_db_url):
    settings = load_settings()
    with psycopg.connect(stock_db_url, autocommit=True) as conn:
        ok = check_table_health(conn, settings)
        assert ok.status == OK, ok.verdict
        in_force = {d["setting"]: d["value"] for d in ok.details if "setting" in d}
        assert in_force["fillfactor (jobs)"] == JOBS_SETTINGS["fillfactor"] == "80"  # migration 023
        assert in_force["autovacuum (server)"] == "on"
        assert {d["index"] for d in ok.details if "index" in d} >= {"jobs_ready_idx", "jobs_pkey"}

        # 900 deleted jobs: under the table's autovacuum threshold (1000), over this call's limit
        ids = enqueue_many([("dt", {"i": i}) for i in range(900)], conn=conn)
        conn.execute("DELETE FROM jobs WHERE id = ANY(%s)", (ids,))
        warn = wait_for(lambda: (c := check_table_health(conn, settings, dead_min=100)).status == WARN and c,
                        timeout=15, message="the dead tuples to reach the statistics")
        assert warn  # a Check (wait_for returns the truthy value)
        assert "dead" in warn.verdict

        conn.execute("VACUUM jobs")
        conn.execute("ALTER TABLE jobs RESET (fillfactor)")
        missing = check_table_health(conn, settings, dead_min=100)
        conn.execute("ALTER TABLE jobs SET (fillfactor = 80)")
        assert missing.status == WARN and "fillfactor" in missing.verdict


def _measured(conn: psycopg.Connection, handler_s: float, claim_s: float, batch: int, per_minute: int) -> None:
    conn.execute("INSERT INTO workers (id, host, pid, queues, concurrency) VALUES ('w1', 'h', 1, '{tp}', 4)")
    rec = LatencyRecorder()
    for _ in range(10):
        rec.observe("claim", claim_s)
        rec.observe("claim_batch", batch)
    for _ in range(40):
        rec.observe("handler", handler_s)
    rec.save(conn, "w1")
    conn.execute("INSERT INTO job_stats (minute, queue, worker_id, completed) "
                 "SELECT date_trunc('minute', now()) - make_interval(mins => m), 'tp', 'w1', %s "
                 "FROM generate_series(1, 5) m", (per_minute,))


def test_throughput_envelope_ok_with_headroom(conn):
    settings = load_settings()
    assert check_throughput(conn, settings).status == OK  # nothing measured yet
    # 4 slots / 0.1 s = 40 jobs/s possible; 600 per minute = 10 jobs/s observed
    _measured(conn, handler_s=0.1, claim_s=0.01, batch=4, per_minute=600)
    enqueue("tp", {})
    check = check_throughput(conn, settings)
    assert check.status == OK
    detail = check.details[0]
    assert detail["observed_jobs_per_s"] == 10
    assert detail["handler_bound_jobs_per_s"] == 40
    assert detail["seed_envelope_jobs_per_s"] == pytest.approx(1 * 4 / (0.01 + 0.1), abs=0.1)


def test_throughput_envelope_warns_at_capacity(conn):
    # 2400 per minute = 40 jobs/s: every slot busy, and ready work is waiting
    _measured(conn, handler_s=0.1, claim_s=0.01, batch=4, per_minute=2400)
    enqueue("tp", {})
    check = check_throughput(conn, load_settings())
    assert check.status == WARN
    assert "handler time is the limit" in check.verdict
    assert "add worker processes" in check.action


def test_connection_budget_ok_then_over(conn):
    settings = load_settings()
    assert check_connections(conn, settings).status in (OK, WARN)  # the shared server has other clients
    max_conn = int(conn.execute("SHOW max_connections").fetchone()[0])
    conn.execute("INSERT INTO workers (id, host, pid, queues, concurrency) "
                 "SELECT 'w' || g, 'h', g, '{q}', 10 FROM generate_series(1, %s) g", (max_conn // 2,))
    check = check_connections(conn, settings)
    assert check.status == FAIL
    assert "PgBouncer" in check.action


def test_doctor_command_exit_codes(fresh_db_url, stock_db_url, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", stock_db_url)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert out.count("[ OK ]") == len(CHECKS), out
    with psycopg.connect(fresh_db_url, autocommit=True) as conn:
        conn.execute("DROP INDEX jobs_ready_idx")
    monkeypatch.setenv("DATABASE_URL", fresh_db_url)
    assert main(["doctor", "--json"]) == 1
    assert '"status": "fail"' in capsys.readouterr().out


def test_run_checks_reports_a_broken_check_instead_of_raising(fresh_db_url):
    with psycopg.connect(fresh_db_url, autocommit=True) as conn:
        conn.execute("DROP TABLE worker_latency")
        checks = {c.name: c for c in run_checks(conn, load_settings())}
    assert checks["throughput envelope"].status == FAIL
    assert "could not run" in checks["throughput envelope"].verdict
    assert checks["claim plan"].status == OK


def test_versions_check_warns_about_jobs_no_live_worker_runs(conn):
    from skiplock.monitor.doctor import check_versions

    conn.execute("INSERT INTO workers (id, host, pid, queues, concurrency, task_versions) "
                 "VALUES ('w', 'h', 1, '{vq}', 4, '{\"vq\": 2}')")
    conn.execute("INSERT INTO jobs (queue, payload, version) VALUES ('vq', '{}', 2)")
    assert check_versions(conn, load_settings()).status == "ok"
    conn.execute("INSERT INTO jobs (queue, payload, version) VALUES ('vq', '{}', 3)")
    check = check_versions(conn, load_settings())
    assert check.status == "warn" and "vq" in check.verdict
    assert check.details == [{"queue": "vq", "workers_run_up_to": 2, "newest_queued": 3, "jobs_waiting": 1}]
