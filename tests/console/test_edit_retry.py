"""Edit before retry (issue 36): a dead job made by a real worker gets a new payload on its console page and
runs with it through the same worker; the original payload is kept and shown, the change is audited; bad
input, a job that moved meanwhile and a read-only login change nothing. Also `skiplock jobs retry --payload`."""

from __future__ import annotations

import html as html_lib
import json
import re
from typing import Any

from skiplock import enqueue
from skiplock.core import state_changes
from skiplock.tools.cli import main
from tests.console.conftest import ADMIN
from tests.support.helpers import scalar, wait_for

# keep succeeded rows (the page then shows the whole life of a retried job), and retry quickly
WORKER = {"SKIPLOCK_QUEUES": "t1", "SKIPLOCK_HISTORY_MODE": "keep", "SKIPLOCK_POLL_INTERVAL": "0.05",
          "SKIPLOCK_BACKOFF_BASE": "0.05", "SKIPLOCK_BACKOFF_CAP": "0.05"}
DIGEST = re.compile(r'name="digest" value="([0-9a-f]{64})"')


def _status(conn: Any, job_id: int) -> str:
    return str(scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)))


def _dead(conn: Any, job_id: int) -> bool:
    return _status(conn, job_id) == "dead"


def _form(admin: Any, job_id: int) -> tuple[str, str]:
    """The job page and the digest its edit form carries."""
    page = admin.get(f"/jobs/{job_id}").get_data(as_text=True)
    match = DIGEST.search(page)
    assert match, "no edit form on the dead job's page"
    return page, match.group(1)


def _edits(conn: Any, job_id: int) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT actor, attempts, old_payload, new_payload FROM job_edits WHERE job_id = %s ORDER BY id",
                        (job_id,)).fetchall()


def _audit(conn: Any, action: str) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT actor, role, count, detail FROM audit_log WHERE action = %s ORDER BY id",
                        (action,)).fetchall()


def test_an_edited_dead_job_runs_with_its_new_payload_and_keeps_the_original(admin: Any, conn: Any,
                                                                            spawn_worker: Any) -> None:
    original = {"permanent": True, "to": "old@example.com", "n": 1}
    job = enqueue("t1", original, max_attempts=3)
    spawn_worker(**WORKER)
    wait_for(lambda: _dead(conn, job), timeout=60, message="the job to die")

    page, digest = _form(admin, job)
    assert 'id="edit-payload"' in page and "Edit and retry" in page and "old@example.com" in page
    fixed = {"to": "new@example.com", "n": 1}
    response = admin.post(f"/jobs/{job}/edit-retry", data={"payload": json.dumps(fixed), "digest": digest})
    assert response.status_code == 303, response.get_data(as_text=True)

    # the same worker runs it again, now with the edited payload, and it succeeds
    wait_for(lambda: _status(conn, job) == "succeeded", timeout=60, message="the edited job to succeed")
    runs = [r[0] for r in conn.execute("SELECT payload FROM test_effects WHERE job_id = %s ORDER BY at", (job,))]
    assert runs == [original, fixed]

    # the original is kept beside the new one, with who and after how many attempts
    assert _edits(conn, job) == [(ADMIN[0], 1, original, fixed)]
    # the audit entry: who, the job, and what changed
    [(actor, role, count, detail)] = _audit(conn, "edit and retry")
    assert (actor, role, count, detail["ids"]) == (ADMIN[0], "admin", 1, [job])
    assert {"path": "$.permanent", "removed": "true"} in detail["changes"]
    assert {"path": "$.to", "old": '"old@example.com"', "new": '"new@example.com"'} in detail["changes"]
    assert "edit and retry" in admin.get("/audit/").get_data(as_text=True)

    # the page shows the original payload and the edit on the timeline, between the two runs
    page = admin.get(f"/jobs/{job}").get_data(as_text=True)
    kept = re.search(r'<pre class="original-payload">(.*?)</pre>', page, re.S)
    assert kept and json.loads(html_lib.unescape(kept.group(1))) == original
    kinds = re.findall(r'<li class="step st-\w+" data-kind="(\w+)"(?: data-attempt="(\d+)")?', page)
    assert kinds == [("enqueued", ""), ("attempt", "1"), ("edit", ""), ("attempt", "1"), ("final", "")], kinds
    assert 'id="edit-payload"' not in page  # succeeded: nothing to edit


def test_after_an_edit_the_succeeded_and_deleted_job_says_where_its_edit_is(admin: Any, conn: Any,
                                                                           spawn_worker: Any) -> None:
    """The default history mode deletes a succeeded job: the operator coming back to the job they fixed
    is told that it ran, not that it "never existed"."""
    job = enqueue("t1", {"permanent": True}, max_attempts=2)
    worker = {**WORKER, "SKIPLOCK_HISTORY_MODE": "delete"}
    spawn_worker(**worker)
    wait_for(lambda: _dead(conn, job), timeout=60, message="the job to die")
    _, digest = _form(admin, job)
    assert admin.post(f"/jobs/{job}/edit-retry", data={"payload": json.dumps({"n": 2}), "digest": digest}
                      ).status_code == 303
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (job,)) == 0, timeout=60,
             message="the edited job to succeed and be deleted")
    gone = admin.get(f"/jobs/{job}")
    text = html_lib.unescape(gone.get_data(as_text=True))
    assert gone.status_code == 404
    assert f"Job {job} is gone: {ADMIN[0]} edited and retried it" in text and "Audit page" in text
    assert "never existed" not in text


def test_bad_input_a_moved_job_and_a_read_only_login_change_nothing(admin: Any, viewer: Any, conn: Any,
                                                                     spawn_worker: Any, monkeypatch: Any) -> None:
    original = {"permanent": True, "to": "a@example.com"}
    job = enqueue("t1", original, max_attempts=1)
    spawn_worker(**WORKER)
    wait_for(lambda: _dead(conn, job), timeout=60, message="the job to die")
    _, digest = _form(admin, job)

    def refused(text: str, code: int, says: str, with_digest: str | None = None) -> None:
        response = admin.post(f"/jobs/{job}/edit-retry", data={"payload": text, "digest": with_digest or digest})
        page = response.get_data(as_text=True)
        assert response.status_code == code, page
        assert says in html_lib.unescape(page), page
        # the operator's text is still in the form, to fix rather than retype
        assert 'id="edit-payload"' in page and text in html_lib.unescape(page)

    refused('{"to": "b@example.com",', 400, "The payload is not valid JSON")
    refused('["b@example.com"]', 400, "must be a JSON object")
    refused(json.dumps(original), 400, "unchanged: use Retry")
    monkeypatch.setenv("SKIPLOCK_MAX_PAYLOAD_BYTES", "64")
    refused(json.dumps({"to": "x" * 100}), 400, "over the limit of 64")
    monkeypatch.delenv("SKIPLOCK_MAX_PAYLOAD_BYTES")
    denied = viewer.post(f"/jobs/{job}/edit-retry", data={"payload": '{"to": "v@x"}', "digest": digest})
    assert denied.status_code == 403
    viewer_page = viewer.get(f"/jobs/{job}").get_data(as_text=True)
    assert re.search(r'<textarea id="edit-payload"[^>]*disabled', viewer_page), "read-only: the form is disabled"
    assert scalar(conn, "SELECT payload FROM jobs WHERE id = %s", (job,)) == original and _dead(conn, job)
    assert _edits(conn, job) == [] and _audit(conn, "edit and retry") == []

    # another operator edits it first (still failing) and it dies again: the stale form is refused
    second = {"permanent": True, "to": "second@example.com"}
    _, fresh = _form(admin, job)
    done = admin.post(f"/jobs/{job}/edit-retry", data={"payload": json.dumps(second), "digest": fresh})
    assert done.status_code == 303
    wait_for(lambda: _dead(conn, job) and scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (job,))
             == 2, timeout=60, message="the second payload's run to die")
    refused('{"to": "first@example.com"}', 409, "payload changed since you opened it")
    assert scalar(conn, "SELECT payload FROM jobs WHERE id = %s", (job,)) == second

    # a job that is no longer dead (retried by someone else, waiting in a paused queue) is refused too
    state_changes.pause_queue(conn, "t1", "test")
    _, current = _form(admin, job)
    assert admin.post(f"/jobs/{job}/retry", {"confirm": "yes"}).status_code == 303
    refused('{"to": "late@example.com"}', 409, f"Job {job} is no longer dead (it is queued now", current)
    assert scalar(conn, "SELECT payload FROM jobs WHERE id = %s", (job,)) == second
    assert len(_edits(conn, job)) == 1 and len(_audit(conn, "edit and retry")) == 1


def test_the_cli_edits_and_retries_one_dead_job(conn: Any, spawn_worker: Any, capsys: Any) -> None:
    job = enqueue("t1", {"permanent": True, "to": "cli@example.com"}, max_attempts=1)
    worker = spawn_worker(**WORKER)
    wait_for(lambda: _dead(conn, job), timeout=60, message="the job to die")
    worker.terminate()  # the retried job stays queued: the test reads the state the CLI left

    assert main(["jobs", "retry", str(job), "--payload", "[1, 2]", "--as", "oncall"]) == 1
    assert "must be a JSON object" in capsys.readouterr().out
    assert main(["jobs", "retry", str(job), "--payload", '{"to": "cli-fixed@example.com"}', "--as", "oncall"]) == 0
    assert "with the edited payload" in capsys.readouterr().out
    assert _status(conn, job) == "queued"
    assert scalar(conn, "SELECT payload FROM jobs WHERE id = %s", (job,)) == {"to": "cli-fixed@example.com"}
    [(actor, role, count, detail)] = _audit(conn, "edit and retry")
    assert (actor, role, count, detail["ids"]) == ("oncall", "cli", 1, [job])
    # a second edit of the now queued job is refused, and changes nothing
    assert main(["jobs", "retry", str(job), "--payload", '{"to": "again@example.com"}', "--as", "oncall"]) == 1
    assert "no longer dead" in capsys.readouterr().out
    assert len(_edits(conn, job)) == 1


def test_an_edited_workflow_parent_reopens_its_dependent_like_retry(admin: Any, conn: Any, spawn_worker: Any) -> None:
    """The edit goes through Retry's own statement: the dependent that ended with the dead parent waits
    again, and runs once the edited parent succeeds."""
    parent = enqueue("t1", {"permanent": True, "step": "parent"}, max_attempts=1)
    child = enqueue("t1", {"step": "child"}, depends_on=[parent])
    spawn_worker(**WORKER)
    wait_for(lambda: _dead(conn, parent) and _status(conn, child) == "dead", timeout=60,
             message="the parent to die and its dependent with it")
    _, digest = _form(admin, parent)
    done = admin.post(f"/jobs/{parent}/edit-retry", data={"payload": '{"step": "parent"}', "digest": digest})
    assert done.status_code == 303
    wait_for(lambda: _status(conn, parent) == "succeeded" and _status(conn, child) == "succeeded", timeout=60,
             message="the edited parent, then its dependent, to succeed")
    runs = [r[0] for r in conn.execute("SELECT job_id FROM test_effects ORDER BY at")]
    assert runs == [parent, parent, child]  # the dependent ran once, after the edited parent
