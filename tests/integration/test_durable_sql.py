"""Durable jobs at the SQL level, against PostgreSQL: the 'parked' state's indexes, skiplock_park and
skiplock_signal in each order, the wake pass and its plan. Jobs are enqueued and claimed through the
product's own functions; a run is a JobContext made as the worker makes it."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import psycopg
import pytest

import skiplock
from skiplock import enqueue
from skiplock.core import state_changes
from skiplock.core.durable import service
from skiplock.core.errors import Park
from skiplock.core.job_context import JobContext
from tests.conftest import REPO, worker_env
from tests.support.helpers import scalar

WORKER = "durable-test-worker"


def claim(conn: psycopg.Connection, queue: str = "durable") -> JobContext:
    """Claim one job of `queue` as a worker does, and the JobContext its handler would get."""
    jobs = state_changes.claim(conn, WORKER, [queue], [30.0], 1, with_context=True)
    assert len(jobs) == 1, jobs
    job = jobs[0]
    assert job.priority is not None and job.run_at is not None
    assert job.created_at is not None and job.started_at is not None
    return JobContext(job.id, job.queue, job.attempts, job.max_attempts, job.priority, job.run_at,
                      job.created_at, job.started_at, job.unique_key, WORKER)


def row(conn: psycopg.Connection, job_id: int) -> tuple[Any, ...]:
    found = conn.execute("SELECT status::text, attempts, worker_id, run_at = '9999-12-31 00:00:00+00' "
                         "FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert found is not None
    return tuple(found)


def test_the_seed_insert_collapses_onto_a_parked_job(conn) -> None:
    job_id = enqueue("durable", {"n": 1}, unique_key="import-7")
    assert job_id is not None
    ctx = claim(conn)
    with pytest.raises(Park):
        ctx.wait_for("never-sent")
    assert row(conn, job_id) == ("parked", 0, None, True)
    # the seed's SQL-only producer: the index rebuilt with 'parked' is still inferred, and the
    # duplicate collapses onto the parked job
    inserted = conn.execute(
        "INSERT INTO jobs (queue, payload, unique_key) VALUES ('durable', '{}', 'import-7') "
        "ON CONFLICT (unique_key) WHERE status IN ('queued','running') DO NOTHING RETURNING id").fetchall()
    assert inserted == []
    assert enqueue("durable", {"n": 2}, unique_key="import-7") is None  # the Python producer too
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE unique_key = 'import-7'") == 1
    assert scalar(conn, "SELECT pg_get_indexdef('jobs_unique_inflight'::regclass)").endswith(
        "WHERE (status = ANY (ARRAY['queued'::job_status, 'running'::job_status, 'parked'::job_status]))")


def test_a_step_is_stored_once_and_returned_on_the_next_run(conn) -> None:
    job_id = enqueue("durable", {})
    calls: list[int] = []

    def charge(n: int) -> dict[str, int]:
        calls.append(n)
        return {"charged": n}

    ctx = claim(conn)
    assert ctx.step("charge", charge, 5) == {"charged": 5}
    assert ctx.step("charge", charge, 6) == {"charged": 5}  # the same run: stored
    ctx.save_cursor("row", 41)
    with pytest.raises(Park):
        ctx.sleep("nap", 0.2)
    assert row(conn, job_id)[:3] == ("parked", 0, None)
    assert scalar(conn, "SELECT value FROM job_cursors WHERE job_id = %s AND name = 'row'", (job_id,)) == 41
    conn.execute("UPDATE jobs SET run_at = now() WHERE id = %s", (job_id,))  # the clock jumps: the sleep is due
    assert service.wake_due(conn) == {"durable": 1}
    again = claim(conn)
    assert again.attempt == 1  # the park gave its attempt back
    assert again.step("charge", charge, 7) == {"charged": 5}
    assert again.cursor("row") == 41
    assert calls == [5]


def test_a_signal_sent_before_the_wait_is_returned_at_once(conn) -> None:
    assert skiplock.signal("paid:1", {"amount": 10}) == 0  # nobody waits yet: kept
    assert skiplock.signal("paid:1", {"amount": 99}) == 0  # the first signal wins
    enqueue("durable", {})
    ctx = claim(conn)
    assert ctx.wait_for("paid:1", timeout=60) == {"amount": 10}
    assert row(conn, ctx.id)[0] == "running"


def test_a_signal_after_the_park_wakes_the_job_with_its_payload(conn) -> None:
    job_id = enqueue("durable", {})
    ctx = claim(conn)
    with pytest.raises(Park):
        ctx.wait_for("paid:2", timeout=3600)
    assert row(conn, job_id)[0] == "parked"
    with psycopg.connect(conn.info.dsn, autocommit=True) as listener:
        listener.execute("LISTEN skiplock_jobs")
        assert skiplock.signal("paid:2", {"amount": 3}) == 1
        notes = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    assert notes == ["durable"]  # the queue's workers are told, as the listener acts on a queue's name
    assert row(conn, job_id)[0] == "queued"
    assert scalar(conn, "SELECT count(*) FROM job_waits WHERE job_id = %s", (job_id,)) == 0
    again = claim(conn)
    assert again.wait_for("paid:2", timeout=3600) == {"amount": 3}


def test_a_rolled_back_signal_wakes_nobody(conn, db_url) -> None:
    enqueue("durable", {})
    ctx = claim(conn)
    with pytest.raises(Park):
        ctx.wait_for("paid:3")
    with psycopg.connect(db_url) as webhook:
        assert skiplock.signal("paid:3", {"ok": True}, conn=webhook) == 1
        webhook.rollback()
    assert row(conn, ctx.id)[0] == "parked"
    assert scalar(conn, "SELECT count(*) FROM job_signals WHERE key = 'paid:3'") == 0


def test_a_wait_times_out_and_raises_wait_timeout_on_the_next_run(conn) -> None:
    enqueue("durable", {})
    ctx = claim(conn)
    with pytest.raises(Park):
        ctx.wait_for("paid:4", timeout=3600)
    # the deadline is stored once: a re-park after an early wake keeps it
    deadline = scalar(conn, "SELECT result #>> '{}' FROM job_steps WHERE job_id = %s AND name = 'timeout:paid:4'",
                      (ctx.id,))
    conn.execute("UPDATE job_steps SET result = to_jsonb(now() - interval '1 s') "
                 "WHERE job_id = %s AND name = 'timeout:paid:4'", (ctx.id,))
    conn.execute("UPDATE jobs SET run_at = now() WHERE id = %s", (ctx.id,))
    assert deadline is not None
    assert service.wake_due(conn) == {"durable": 1}
    again = claim(conn)
    with pytest.raises(skiplock.WaitTimeout):
        again.wait_for("paid:4", timeout=3600)
    assert scalar(conn, "SELECT result FROM job_steps WHERE job_id = %s AND name = 'wait_for:paid:4'",
                  (ctx.id,)) == {"timeout": True}
    # a signal after the timeout changes nothing for this job: its answer is stored
    assert skiplock.signal("paid:4", 1) == 0
    with pytest.raises(skiplock.WaitTimeout):
        again.wait_for("paid:4")


def test_a_lost_run_cannot_park(conn) -> None:
    enqueue("durable", {})
    ctx = claim(conn)
    state_changes.release_running(conn, [ctx.id], "test")  # an operator took the job back
    with pytest.raises(skiplock.JobOwnershipLost):
        ctx.sleep("nap", 60)
    assert row(conn, ctx.id)[0] == "queued"


def test_the_wake_pass_walks_only_parked_rows(conn) -> None:
    conn.execute("SET enable_seqscan = off")  # a small table: the plan the index gives at any size
    plan = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN " + service.Q.wake_due.replace("%(limit)s", "1000")).fetchall())
    assert "jobs_parked_idx" in plan, plan


def test_cancel_ends_a_parked_job_and_the_pruner_clears_its_wait(conn) -> None:
    enqueue("durable", {})
    ctx = claim(conn)
    with pytest.raises(Park):
        ctx.sleep("nap", 3600)
    assert state_changes.cancel_queued(conn, [ctx.id], "ops") == [ctx.id]
    assert row(conn, ctx.id)[0] == "failed"
    assert service.prune(conn, signal_retention=3600, limit=100) >= 1
    assert scalar(conn, "SELECT count(*) FROM job_waits WHERE job_id = %s", (ctx.id,)) == 0


def test_step_results_must_be_json(conn) -> None:
    enqueue("durable", {})
    ctx = claim(conn)
    with pytest.raises(TypeError, match="JSON-serialisable"):
        ctx.step("bad", lambda: object())
    with pytest.raises(ValueError, match="skiplock's own"):
        ctx.step("sleep:x", lambda: 1)
    assert json.loads(json.dumps(ctx.step("ok", lambda: [1, "a"]))) == [1, "a"]


def cli(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skiplock.tools.cli", "jobs", *args], cwd=REPO,
                          env=worker_env(db_url), capture_output=True, text=True, timeout=60)


def test_the_cli_sends_a_signal_and_wakes_a_sleeper_with_an_audit_row(conn, db_url) -> None:
    enqueue("durable", {})
    waiting = claim(conn)
    with pytest.raises(Park):
        waiting.wait_for("order-42:paid")
    enqueue("durable", {})
    sleeping = claim(conn)
    with pytest.raises(Park):
        sleeping.sleep("nap", 3600)

    sent = cli(db_url, "signal", "order-42:paid", "--payload", '{"amount": 12}', "--actor", "ops-kim")
    assert sent.returncode == 0, sent.stderr
    assert "woke 1 job(s)" in sent.stdout
    assert row(conn, waiting.id)[0] == "queued"
    assert scalar(conn, "SELECT payload FROM job_signals WHERE key = 'order-42:paid'") == {"amount": 12}
    bad = cli(db_url, "signal", "k", "--payload", "{nope")
    assert bad.returncode != 0 and "not JSON" in bad.stderr + bad.stdout

    woke = cli(db_url, "wake", str(sleeping.id), str(waiting.id))
    assert woke.returncode == 0, woke.stderr
    assert "woke 1 job(s); 1 were not parked" in woke.stdout
    assert row(conn, sleeping.id)[0] == "queued"
    audit = conn.execute("SELECT actor, action, count FROM audit_log ORDER BY id").fetchall()
    assert audit[0] == ("ops-kim", "send signal", 1) and audit[1][1:] == ("wake now", 1)
