"""Parked jobs as the operator's tools see them, against PostgreSQL: "why isn't it running", the doctor's
check, the sweeper's repairs, the metrics' parked state and the pruner's side rows."""

from __future__ import annotations

import pytest

import skiplock
from skiplock import enqueue
from skiplock.core.durable import service
from skiplock.core.errors import Park
from skiplock.core.plumbing.config import load_settings
from skiplock.core.plumbing.db import make_pool
from skiplock.monitor import doctor, why
from skiplock.services.durable_waker import DurableWaker, ParkedSweeper
from skiplock.services.pruner import Pruner
from tests.integration.test_durable_sql import claim, row
from tests.integration.test_metrics import q, scrape
from tests.support.helpers import scalar


def parked_sleeping(conn, seconds: float = 3600) -> int:
    enqueue("durable", {})
    ctx = claim(conn)
    with pytest.raises(Park):
        ctx.sleep("nap", seconds)
    return ctx.id


def parked_waiting(conn, key: str, timeout: float | None = None) -> int:
    enqueue("durable", {})
    ctx = claim(conn)
    with pytest.raises(Park):
        ctx.wait_for(key, timeout=timeout)
    return ctx.id


def test_why_explains_a_sleeping_and_a_waiting_job(conn) -> None:
    sleeping = parked_sleeping(conn)
    waiting = parked_waiting(conn, "order-7:paid", timeout=3 * 86400)
    forever = parked_waiting(conn, "approval-9")
    (nap,) = why.for_job(conn, sleeping) or []
    assert nap.code == "parked" and "sleeping ('nap') until" in nap.text and nap.facts["sleep"] == "nap"
    (wait,) = why.for_job(conn, waiting) or []
    assert "waiting for the signal 'order-7:paid' until its timeout" in wait.text
    assert wait.facts["timeout"] is not None and "WaitTimeout" in wait.text
    (never,) = why.for_job(conn, forever) or []
    assert "with no timeout" in never.text and never.facts["timeout"] is None


def test_doctor_reports_a_parked_job_nothing_can_wake_and_the_sweeper_repairs_it(conn, db_url) -> None:
    settings = load_settings()
    parked_waiting(conn, "fine")  # a key wakes this one: not reported
    assert doctor.check_parked(conn, settings).status == doctor.OK
    lost = parked_waiting(conn, "lost")
    conn.execute("DELETE FROM job_waits WHERE job_id = %s", (lost,))  # what only a bug (or a hand) could do
    check = doctor.check_parked(conn, settings)
    assert check.status == doctor.FAIL and check.details[0]["job"] == lost and "1 parked job(s)" in check.verdict

    signalled = parked_waiting(conn, "raced")
    conn.execute("INSERT INTO job_signals (key, payload) VALUES ('raced', '5')")  # a signal that found no one
    with make_pool(db_url, "test-sweeper", size=1) as pool:
        repaired = ParkedSweeper(pool).run_once()
    assert repaired.signalled == [signalled] and repaired.unwaited == [lost]
    assert row(conn, lost)[0] == row(conn, signalled)[0] == "queued"
    assert doctor.check_parked(conn, settings).status == doctor.OK
    again = claim(conn)  # both are ready now, in either order
    other = claim(conn)
    woken = {again.id: again, other.id: other}
    assert woken[signalled].wait_for("raced") == 5


def test_the_wake_pass_wakes_only_due_jobs_and_metrics_count_parked(conn, db_url) -> None:
    due = parked_sleeping(conn, seconds=3600)
    later = parked_sleeping(conn, seconds=3600)
    parked_waiting(conn, "metrics-key")
    assert scrape(db_url)[("skiplock_queue_jobs", q("durable", state="parked"))] == 3
    conn.execute("UPDATE jobs SET run_at = now() - interval '1 s' WHERE id = %s", (due,))
    with make_pool(db_url, "test-waker", size=1) as pool:
        assert DurableWaker(pool).run_once() == 1
        assert DurableWaker(pool).run_once() == 0
    assert row(conn, due)[0] == "queued" and row(conn, later)[0] == "parked"
    assert service.parked_counts(conn) == {"durable": 2}


def test_the_pruner_removes_side_rows_of_gone_jobs_and_old_signals(conn, db_url) -> None:
    enqueue("durable", {})
    ctx = claim(conn)
    ctx.step("one", lambda: 1)
    ctx.save_cursor("c", 1)
    conn.execute("DELETE FROM jobs WHERE id = %s", (ctx.id,))  # as a delete-mode ack does at success
    conn.execute("INSERT INTO job_cursors (job_id, name, value) VALUES (%s, 'c', '1')", (ctx.id,))
    skiplock.signal("old", 1)
    skiplock.signal("new", 2)
    conn.execute("UPDATE job_signals SET sent_at = now() - interval '8 days' WHERE key = 'old'")
    kept = parked_waiting(conn, "still-waiting")
    with make_pool(db_url, "test-pruner", size=1) as pool:
        Pruner(pool, load_settings()).run_once()
    assert scalar(conn, "SELECT count(*) FROM job_steps WHERE job_id = %s", (ctx.id,)) == 0
    assert scalar(conn, "SELECT count(*) FROM job_cursors WHERE job_id = %s", (ctx.id,)) == 0
    assert [r[0] for r in conn.execute("SELECT key FROM job_signals ORDER BY key")] == ["new"]
    assert scalar(conn, "SELECT count(*) FROM job_waits WHERE job_id = %s", (kept,)) == 1
