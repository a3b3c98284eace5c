"""Operator actions through the console: each calls the core's guarded transition and is audited."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import pytest

from skiplock.core import state_changes
from tests.support.factory import make_job, status_of


def _count(conn, sql, *params):
    return conn.execute(sql, params).fetchone()[0]


def test_retry_one_dead_job_resets_attempts_and_run_at(admin, conn, caplog):
    job = make_job(conn, "t1", "dead", attempts=5, last_error="boom", run_in=-3600)
    with caplog.at_level(logging.INFO, logger="skiplock.console.audit"):
        response = admin.post("/dead/action?action=retry", {"one": str(job), "confirm": "yes"})
    assert response.status_code == 303
    row = conn.execute("SELECT status::text, attempts, run_at > now() - interval '1 minute', finished_at "
                       "FROM jobs WHERE id = %s", (job,)).fetchone()
    assert row == ("queued", 0, True, None)
    assert any("operator ops-admin (admin) retry selected: 1 job(s)" in r.getMessage() for r in caplog.records)
    assert "Retried 1 job(s)." in admin.get("/dead/").get_data(as_text=True)


def test_purge_one(admin, conn):
    job = make_job(conn, "t1", "dead")
    keep = make_job(conn, "t1", "queued")
    assert admin.post("/dead/action?action=purge", {"one": str(job), "confirm": "yes"}).status_code == 303
    assert status_of(conn, job) is None and status_of(conn, keep) == "queued"


def test_selected_needs_a_confirmation_stating_the_count(admin, conn):
    jobs = [make_job(conn, "t1", "dead") for _ in range(3)]
    other = make_job(conn, "t1", "dead")
    data = {"action": "purge", "ids": [str(j) for j in jobs]}
    page = admin.post("/dead/action?scope=selected", data)
    assert page.status_code == 200
    assert "Purge 3 jobs?" in page.get_data(as_text=True)
    assert _count(conn, "SELECT count(*) FROM jobs") == 4  # nothing happened yet
    done = admin.post("/dead/action", {**data, "scope": "selected", "confirm": "yes"})
    assert done.status_code == 303
    assert [status_of(conn, j) for j in jobs] == [None, None, None] and status_of(conn, other) == "dead"


def test_selected_without_any_job_is_400(admin):
    assert admin.post("/dead/action?scope=selected", {"action": "retry"}).status_code == 400
    assert admin.post("/dead/action?scope=selected", {"action": "retry", "ids": ["x1"]}).status_code == 400
    assert admin.post("/dead/action?scope=everything", {"action": "retry"}).status_code == 400
    assert admin.post("/dead/action?scope=selected", {"action": "explode", "ids": ["1"]}).status_code == 400


def test_all_matching_filter_with_confirmation(admin, conn):
    timeouts = [make_job(conn, "t1", "dead", last_error="TimeoutError: slow\nTraceback") for _ in range(7)]
    other_error = make_job(conn, "t1", "dead", last_error="KeyError: 'x'")
    other_queue = make_job(conn, "t2", "dead", last_error="TimeoutError: slow")
    old = make_job(conn, "t1", "dead", last_error="TimeoutError: slow", finished_ago=3 * 86400)
    flt = {"action": "retry", "queue": "t1", "error": "TimeoutError: slow", "window": "24h"}
    page = admin.post("/dead/action?scope=matching", flt).get_data(as_text=True)
    assert "Retry 7 jobs?" in page
    as_of = re.search(r'name="as_of" value="(\d+)"', page).group(1)  # type: ignore[union-attr]
    # a job dying after the confirmation is not part of what the operator agreed to
    late = make_job(conn, "t1", "dead", last_error="TimeoutError: slow")
    conn.execute("UPDATE jobs SET finished_at = now() + interval '1 second' WHERE id = %s", (late,))
    done = admin.post("/dead/action", {**flt, "scope": "matching", "confirm": "yes", "as_of": as_of})
    assert done.status_code == 303
    assert [status_of(conn, j) for j in timeouts] == ["queued"] * 7
    assert [status_of(conn, j) for j in (other_error, other_queue, old, late)] == ["dead"] * 4
    assert "Retried 7 job(s) matching the filter." in admin.get(done.headers["Location"]).get_data(as_text=True)


def test_confirm_without_as_of_is_400(admin, conn):
    make_job(conn, "t1", "dead")
    response = admin.post("/dead/action", {"action": "purge", "scope": "matching", "confirm": "yes"})
    assert response.status_code == 400
    assert _count(conn, "SELECT count(*) FROM jobs") == 1


def test_pause_and_resume_queue(admin, conn, caplog):
    conn.execute("INSERT INTO jobs (queue, payload) VALUES ('t1', '{}')")  # a queue with work is known
    with caplog.at_level(logging.INFO, logger="skiplock.console.audit"):
        assert admin.post("/queues/t1/pause", {"confirm": "yes"}).status_code == 303
    assert conn.execute("SELECT queue, paused_by FROM paused_queues").fetchall() == [("t1", "ops-admin")]
    assert "paused" in admin.get("/queues/t1").get_data(as_text=True)
    assert any("pause queue" in r.getMessage() for r in caplog.records)
    assert admin.post("/queues/t1/resume", {"confirm": "yes"}).status_code == 303
    assert _count(conn, "SELECT count(*) FROM paused_queues") == 0


def test_release_running_jobs(admin, conn):
    a = make_job(conn, "t1", "running", attempts=1)
    b = make_job(conn, "t1", "running", attempts=5, max_attempts=5)
    c = make_job(conn, "t1", "running", attempts=1)
    assert admin.post("/running/release", {"ids": [str(a), str(b)], "confirm": "yes"}).status_code == 303
    assert (status_of(conn, a), status_of(conn, b), status_of(conn, c)) == ("queued", "dead", "running")
    assert admin.post("/running/release", {"one": str(c), "ids": [str(a)], "confirm": "yes"}).status_code == 303
    assert status_of(conn, c) == "queued"
    error = conn.execute("SELECT last_error FROM jobs WHERE id = %s", (a,)).fetchone()[0]
    assert error.startswith("released by ops-admin from worker w-test")


def test_job_actions(admin, conn):
    queued = make_job(conn, "t1", "queued")
    scheduled = make_job(conn, "t1", "queued", run_in=3600)
    running = make_job(conn, "t1", "running", attempts=1)
    dead = make_job(conn, "t1", "dead")
    # each first answers with a confirmation that names the job, the database and what happens, and changes nothing
    for job, action, status in ((queued, "cancel", "queued"), (scheduled, "run-now", "queued"),
                                (running, "release", "running"), (dead, "purge", "dead"), (dead, "retry", "dead")):
        page = admin.post(f"/jobs/{job}/{action}")
        assert page.status_code == 200 and status_of(conn, job) == status, action
        html = page.get_data(as_text=True)
        assert f"1 job: job {job} of queue t1" in html and "data-database>" in html and 'value="yes"' in html
    assert admin.post(f"/jobs/{queued}/cancel", {"confirm": "yes"}).status_code == 303
    assert status_of(conn, queued) == "failed"
    assert admin.post(f"/jobs/{scheduled}/run-now", {"confirm": "yes"}).status_code == 303
    assert _count(conn, "SELECT run_at <= now() FROM jobs WHERE id = %s", scheduled) is True
    assert admin.post(f"/jobs/{running}/release", {"confirm": "yes"}).status_code == 303
    assert status_of(conn, running) == "queued"
    assert admin.post(f"/jobs/{dead}/purge", {"confirm": "yes"}).status_code == 303
    assert status_of(conn, dead) is None


def test_action_on_a_job_in_the_wrong_state_changes_nothing(admin, conn):
    job = make_job(conn, "t1", "running")
    page = admin.post(f"/jobs/{job}/purge").get_data(as_text=True)  # the confirmation says so, and cannot be sent
    assert f"Job {job} cannot be purged" in page and "disabled" in page
    response = admin.post(f"/jobs/{job}/purge", {"confirm": "yes"})
    assert response.status_code == 303
    assert status_of(conn, job) == "running"
    assert "was not changed" in admin.get(response.headers["Location"]).get_data(as_text=True)
    assert admin.post(f"/jobs/{job}/explode").status_code == 404
    assert admin.post("/jobs/x1/retry").status_code == 400


# ---- the core's bulk functions the console uses ---------------------------------------------------


def test_core_bulk_actions_walk_in_batches(conn):
    ids = [make_job(conn, "t1", "dead", last_error="E: one") for _ in range(10)]
    keep = make_job(conn, "t1", "failed", last_error="E: one")
    flt = state_changes.FinishedFilter(status="dead", queue="t1", error="E: one")
    assert state_changes.count_finished_matching(conn, flt) == 10
    assert state_changes.count_finished_matching(conn, flt, cap=4) == 4
    assert state_changes.retry_matching(conn, flt, batch=3) == 10
    assert [status_of(conn, i) for i in ids] == ["queued"] * 10
    assert status_of(conn, keep) == "failed"
    assert state_changes.purge_matching(conn, state_changes.FinishedFilter(status="failed"), batch=1) == 1
    assert status_of(conn, keep) is None


def test_core_filter_window_text_and_until(conn):
    now = conn.execute("SELECT now()").fetchone()[0]
    recent = make_job(conn, "t1", "dead", payload={"customer": "acme"})
    make_job(conn, "t1", "dead", payload={"customer": "acme"}, finished_ago=7200)
    make_job(conn, "t1", "dead", payload={"customer": "globex"})
    flt = state_changes.FinishedFilter(since=now - timedelta(hours=1), text="acme")
    assert state_changes.count_finished_matching(conn, flt) == 1
    assert state_changes.count_finished_matching(conn, state_changes.FinishedFilter(text="%")) == 0  # literal %
    assert state_changes.count_finished_matching(conn,
                                                 state_changes.FinishedFilter(until=now - timedelta(minutes=1))) == 1
    assert state_changes.purge_matching(conn, flt) == 1 and status_of(conn, recent) is None


def test_core_filter_refuses_live_states(conn):
    with pytest.raises(state_changes.InvalidTransition):
        state_changes.retry_matching(conn, state_changes.FinishedFilter(status="queued"))


# ---- recurring (the page works against the contract once skiplock.services.recurring_defs exists) -----------------


def test_recurring_schedules_pause_resume_run(admin, conn):
    conn.execute("""INSERT INTO recurring_schedules (name, queue, kind, schedule, timezone, payload, enabled, active,
                                                     catch_up, next_fire_at, updated_at)
                    VALUES ('nightly-<b>report</b>', 't1', 'cron', '0 3 * * *', 'UTC', '{}', true, true, 'once',
                            now() + interval '1 hour', now())""")
    html = admin.get("/recurring/").get_data(as_text=True)
    assert "nightly-&lt;b&gt;report&lt;/b&gt;" in html and "0 3 * * *" in html
    name = "nightly-<b>report</b>"
    assert admin.post(f"/recurring/{name}/pause", {"confirm": "yes"}).status_code == 303
    assert conn.execute("SELECT enabled FROM recurring_schedules").fetchone()[0] is False
    assert admin.post(f"/recurring/{name}/resume", {"confirm": "yes"}).status_code == 303
    assert conn.execute("SELECT enabled FROM recurring_schedules").fetchone()[0] is True
    before = _count(conn, "SELECT count(*) FROM jobs WHERE queue = 't1' AND status = 'queued'")
    response = admin.post(f"/recurring/{name}/run", {"confirm": "yes"})
    assert response.status_code == 303
    assert _count(conn, "SELECT count(*) FROM jobs WHERE queue = 't1' AND status = 'queued'") == before + 1
    assert "enqueued job" in admin.get(response.headers["Location"]).get_data(as_text=True)


def test_pausing_a_queue_nobody_knows_is_refused_unless_asked_for(admin, conn):
    """A typo (/queues/imagse) must not create a phantom paused queue."""
    refused = admin.post("/queues/imagse/pause", {"confirm": "yes"}, follow_redirects=True)
    assert "was not paused (a typo?)" in refused.get_data(as_text=True)
    assert conn.execute("SELECT count(*) FROM paused_queues").fetchone()[0] == 0
    # a queue with jobs pauses as before
    conn.execute("INSERT INTO jobs (queue, payload) VALUES ('images', '{}')")
    assert admin.post("/queues/images/pause", {"confirm": "yes"}).status_code == 303
    assert conn.execute("SELECT queue FROM paused_queues").fetchall() == [("images",)]
    # a new queue, paused on purpose ahead of its first job
    admin.post("/queues/reports-v2/pause", data={"unknown_ok": "yes", "confirm": "yes"})
    assert conn.execute("SELECT count(*) FROM paused_queues WHERE queue = 'reports-v2'").fetchone()[0] == 1
