"""The job page's Cancel for a running job: admin only, recorded on the row and in the audit log."""

from __future__ import annotations

import logging

from tests.support.factory import make_job


def test_admin_cancels_a_running_job(admin, conn, caplog):
    job = make_job(conn, "t1", "running")
    assert f"/jobs/{job}/cancel-running" in admin.get(f"/jobs/{job}").get_data(as_text=True)
    with caplog.at_level(logging.INFO):
        response = admin.post(f"/jobs/{job}/cancel-running", {"confirm": "yes"})
    assert response.status_code == 303
    who, status = conn.execute("SELECT cancel_requested_by, status::text FROM jobs WHERE id = %s",
                               (job,)).fetchone()
    assert (who, status) == ("console:ops-admin", "running")  # the worker ends it at its next heartbeat
    assert any("cancel running job: 1 job(s)" in r.getMessage() and "ops-admin" in r.getMessage()
               for r in caplog.records)
    assert "cancel requested" in admin.get(f"/jobs/{job}").get_data(as_text=True)


def test_a_read_only_login_gets_403(viewer, conn):
    job = make_job(conn, "t1", "running")
    assert viewer.post(f"/jobs/{job}/cancel-running", {}).status_code == 403
    assert conn.execute("SELECT cancel_requested_by FROM jobs WHERE id = %s", (job,)).fetchone() == (None,)


def test_cancel_after_the_job_finished_changes_nothing_and_says_so(admin, conn):
    job = make_job(conn, "t1", "dead", last_error="ValueError: x")
    assert admin.post(f"/jobs/{job}/cancel-running", {"confirm": "yes"}).status_code == 303
    html = admin.get(f"/jobs/{job}").get_data(as_text=True)
    assert f"Job {job} already finished (dead): nothing changed." in html
    row = conn.execute("SELECT status::text, last_error, cancel_requested_by FROM jobs WHERE id = %s",
                       (job,)).fetchone()
    assert row == ("dead", "ValueError: x", None)
