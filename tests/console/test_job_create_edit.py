"""Create a job from the console, and edit a queued one: the producer's own checks refuse what `enqueue`
refuses (the operator's text kept), a confirmation names the database and the changes, a real worker runs
the job with what was saved, the audit trail has the diff, and an edit is refused when the job changed or
was claimed after the form was opened."""

from __future__ import annotations

import html as html_lib
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from markupsafe import escape

from skiplock import enqueue
from skiplock.core import state_changes
from tests.support.helpers import scalar, wait_for

WORKER = {"SKIPLOCK_QUEUES": "t1,t2", "SKIPLOCK_POLL_INTERVAL": "0.05"}
HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')


def _hidden(page: str) -> dict[str, str]:
    """The hidden fields of the page's form (the edit form's seen_*, a confirmation's values), unescaped."""
    return {k: html_lib.unescape(v) for k, v in HIDDEN.findall(page) if k != "csrf_token"}


def _audit(conn: Any, action: str) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT actor, count, detail FROM audit_log WHERE action = %s ORDER BY id",
                        (action,)).fetchall()


def _effects(conn: Any, job: int) -> list[Any]:
    return [r[0] for r in conn.execute("SELECT payload FROM test_effects WHERE job_id = %s", (job,))]


@pytest.mark.slow
def test_a_job_created_on_the_console_is_confirmed_audited_and_run_by_a_worker(admin: Any, conn: Any,
                                                                              spawn_worker: Any) -> None:
    form = admin.get("/jobs/new?queue=t1").get_data(as_text=True)
    assert 'id="job-queue" name="queue" value="t1"' in form
    fields = {"queue": "t1", "payload": '{"to": "ada@example.com", "n": 1}', "run_at": "", "priority": "5"}
    confirm = admin.post("/jobs/new", data=fields).get_data(as_text=True)
    assert "Enqueue a job on t1?" in confirm and "On database skiplock" in confirm
    assert "1 job is enqueued on queue t1, priority 5" in confirm
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0  # nothing before the confirmation
    done = admin.post("/jobs/new", data=_hidden(confirm))
    assert done.status_code == 303
    job = int(done.headers["Location"].rsplit("/", 1)[1])
    row = conn.execute("SELECT queue, payload, priority, status::text FROM jobs WHERE id = %s", (job,)).fetchone()
    assert row == ("t1", {"to": "ada@example.com", "n": 1}, 5, "queued")
    [(actor, count, detail)] = _audit(conn, "create job")
    assert (actor, count, detail["ids"], detail["queue"], detail["priority"]) == ("ops-admin", 1, [job], "t1", 5)
    spawn_worker(**WORKER)
    wait_for(lambda: _effects(conn, job) == [{"to": "ada@example.com", "n": 1}], timeout=60,
             message="the worker to run the new job")


@pytest.mark.parametrize(("fields", "message"), [
    ({"payload": '{"to": '}, "The payload is not valid JSON: Expecting value: line 1 column 8"),
    ({"queue": "  "}, "queue name must be a non-empty string."),
    ({"queue": "q" * 129}, "queue name is longer than 128 characters."),
    ({"priority": "high"}, "priority must be a whole number, e.g. 0 or 10, got &#39;high&#39;."),
    ({"priority": str(2**40)}, "priority must fit in a 32-bit integer, got 1099511627776."),
    ({"payload": '{"a": "x\\u0000y"}'}, "payload must not contain NUL"),
    ({"run_at": "tomorrow"}, "run_at must be a time like 2026-12-01 09:30 (UTC)"),
])
def test_what_enqueue_refuses_the_form_refuses_keeping_the_text(admin: Any, conn: Any, fields: dict[str, str],
                                                                message: str) -> None:
    typed = {"queue": "t1", "payload": '{"to": "x"}', "run_at": "", "priority": "0", **fields}
    for confirm in ("", "yes"):  # a confirmation made by hand is checked again
        response = admin.post("/jobs/new", data={**typed, "confirm": confirm})
        page = response.get_data(as_text=True)
        assert response.status_code == 400 and message in page, page
        assert str(escape(typed["payload"])) in page  # the operator's own text, kept
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0
    assert _audit(conn, "create job") == []


def test_a_run_at_without_a_zone_is_utc_and_a_zone_given_is_kept(admin: Any, conn: Any) -> None:
    for text, expected in (("2030-01-02 03:04:05", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
                           ("2030-01-02T03:04:05+02:00", datetime(2030, 1, 2, 1, 4, 5, tzinfo=UTC))):
        admin.post("/jobs/new", data={"queue": "t1", "payload": "{}", "run_at": text, "priority": "0",
                                      "confirm": "yes"})
        assert scalar(conn, "SELECT run_at FROM jobs ORDER BY id DESC LIMIT 1") == expected


def _open_edit(admin: Any, job: int) -> tuple[str, dict[str, str]]:
    page = admin.get(f"/jobs/{job}/edit").get_data(as_text=True)
    return page, _hidden(page)


@pytest.mark.slow
def test_an_edited_scheduled_job_runs_with_what_was_saved_and_the_diff_is_audited(admin: Any, conn: Any,
                                                                                  spawn_worker: Any) -> None:
    later = datetime.now(UTC) + timedelta(hours=2)
    job = enqueue("t1", {"to": "old@example.com", "n": 1}, run_at=later)
    assert "Edit…" in admin.get(f"/jobs/{job}").get_data(as_text=True)
    page, seen = _open_edit(admin, job)
    assert '"to": "old@example.com"' in html_lib.unescape(page) and seen["seen_queue"] == "t1"
    typed = {**seen, "queue": "t2", "payload": '{"to": "new@example.com", "n": 1}', "run_at": "", "priority": "3"}
    confirm = admin.post(f"/jobs/{job}/edit", data=typed).get_data(as_text=True)
    assert f"Save the changes to job {job}?" in confirm
    text = html_lib.unescape(confirm)
    assert "queue t1 \u2192 t2" in text and "priority 0 \u2192 3" in text
    assert '$.to "old@example.com" \u2192 "new' in text
    assert scalar(conn, "SELECT queue FROM jobs WHERE id = %s", (job,)) == "t1"  # nothing before the confirmation

    done = admin.post(f"/jobs/{job}/edit", data=_hidden(confirm))
    assert done.status_code == 303 and done.headers["Location"].endswith(f"/jobs/{job}")
    [(actor, count, detail)] = _audit(conn, "edit job")
    assert (actor, count, detail["ids"]) == ("ops-admin", 1, [job])
    assert [c["path"] for c in detail["changes"]] == ["queue", "priority", "run_at", "$.to"]
    spawn_worker(**WORKER)
    wait_for(lambda: _effects(conn, job) == [{"to": "new@example.com", "n": 1}], timeout=60,
             message="the worker to run the edited job")
    assert scalar(conn, "SELECT queue FROM test_effects WHERE job_id = %s", (job,)) == "t2"


def test_an_edit_of_a_job_changed_meanwhile_is_refused_and_keeps_the_text(admin: Any, conn: Any) -> None:
    job = enqueue("t1", {"n": 1}, run_at=datetime.now(UTC) + timedelta(hours=1))
    _, seen = _open_edit(admin, job)
    typed = {**seen, "queue": "t1", "payload": '{"n": 2, "mine": true}', "run_at": seen["shown_run_at"],
             "priority": "0"}
    # another operator makes it run now, after this form was opened
    assert state_changes.run_now(conn, [job]) == [job]
    for confirm in ("", "yes"):
        response = admin.post(f"/jobs/{job}/edit", data={**typed, "confirm": confirm})
        page = response.get_data(as_text=True)
        assert response.status_code == 409
        assert f"Job {job} changed since you opened it (its run_at)" in page
        assert str(escape('{"n": 2, "mine": true}')) in page
    assert scalar(conn, "SELECT payload FROM jobs WHERE id = %s", (job,)) == {"n": 1}
    assert _audit(conn, "edit job") == []


@pytest.mark.slow
def test_an_edit_of_a_job_a_worker_claimed_meanwhile_is_refused(admin: Any, conn: Any, spawn_worker: Any) -> None:
    job = enqueue("t1", {"sleep_after": 30})
    _, seen = _open_edit(admin, job)
    spawn_worker(**WORKER)
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job,)) == "running", timeout=60,
             message="the worker to claim it")
    typed = {**seen, "queue": "t1", "payload": '{"sleep_after": 1}', "run_at": seen["shown_run_at"],
             "priority": "0", "confirm": "yes"}
    response = admin.post(f"/jobs/{job}/edit", data=typed)
    page = response.get_data(as_text=True)
    assert response.status_code == 409 and f"Job {job} is no longer queued: it is running now" in page
    assert scalar(conn, "SELECT payload FROM jobs WHERE id = %s", (job,)) == {"sleep_after": 30}
    assert admin.get(f"/jobs/{job}/edit").status_code == 409  # a running job has no edit form


def test_an_unchanged_edit_and_a_forged_form_change_nothing(admin: Any, conn: Any) -> None:
    job = enqueue("t1", {"n": 1}, run_at=datetime.now(UTC) + timedelta(hours=1))
    _, seen = _open_edit(admin, job)
    same = {**seen, "queue": "t1", "payload": '{"n": 1}', "run_at": seen["shown_run_at"], "priority": "0"}
    page = admin.post(f"/jobs/{job}/edit", data=same).get_data(as_text=True)
    assert f"Nothing to save: job {job} already has these values." in page
    assert admin.post(f"/jobs/{job}/edit", data={"queue": "t1", "payload": "{}"}).status_code == 400


def test_a_read_only_login_can_neither_create_nor_edit(viewer: Any, conn: Any) -> None:
    job = enqueue("t1", {"n": 1})
    assert 'disabled title="read-only login"' in viewer.get("/jobs/new").get_data(as_text=True)
    assert viewer.post("/jobs/new", data={"queue": "t1", "payload": "{}", "confirm": "yes"}).status_code == 403
    assert viewer.post(f"/jobs/{job}/edit", data={"queue": "t2", "confirm": "yes"}).status_code == 403
    assert scalar(conn, "SELECT count(*) FROM jobs") == 1
    assert json.dumps(scalar(conn, "SELECT payload FROM jobs")) == '{"n": 1}'
