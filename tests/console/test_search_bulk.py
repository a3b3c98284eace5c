"""Bulk retry, cancel and purge on what a search found (every page of it, not only the one shown): a dry-run
count and a confirmation with the count and the database, the action on exactly the search's filter, pinned
to the jobs counted (a job that matches later or moves meanwhile is left alone, and the result says so),
a cap, the audit trail; on dead jobs a real worker made."""

from __future__ import annotations

import html as html_lib
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from skiplock import enqueue, enqueue_many
from skiplock.core import state_changes
from skiplock.webapp.pages import search
from tests.support.helpers import scalar, wait_for

HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')
FLASH = re.compile(r'<div class="flash (\w+)" role="status">([^<]*)</div>')


def _confirm_form(page: str) -> dict[str, str]:
    return {k: html_lib.unescape(v) for k, v in HIDDEN.findall(page) if k != "csrf_token"}


def _count(conn: Any, where: str) -> int:
    return int(scalar(conn, f"SELECT count(*) FROM jobs WHERE {where}"))


def _audit(conn: Any, action: str) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT count, detail FROM audit_log WHERE action = %s ORDER BY id", (action,)).fetchall()


def _flash(admin: Any, url: str) -> str:
    page = admin.get(url).get_data(as_text=True)
    return " ".join(html_lib.unescape(text) for _, text in FLASH.findall(page))


@pytest.fixture
def dead_from_a_worker(conn: Any, spawn_worker: Any) -> list[int]:
    """60 dead jobs of queue t2, more than a page of search, killed by a real worker's handler."""
    ids = enqueue_many([("t2", {"permanent": True, "n": n}) for n in range(60)], conn=conn)
    worker = spawn_worker(SKIPLOCK_QUEUES="t2", SKIPLOCK_POLL_INTERVAL="0.05")
    wait_for(lambda: _count(conn, "queue = 't2' AND status = 'dead'") == 60, timeout=90, message="60 dead jobs")
    worker.terminate()
    return list(ids)


@pytest.mark.slow
def test_retry_acts_on_every_page_of_the_search_after_a_dry_run(admin: Any, conn: Any,
                                                                 dead_from_a_worker: list[int]) -> None:
    enqueue("t2", {"n": "queued, not dead"}, conn=conn, run_at=datetime.now(UTC) + timedelta(hours=1))
    results = admin.get("/search/?queue=t2").get_data(as_text=True)
    assert results.count('data-job-id="') == search.PAGE_SIZE  # one page shown of 61
    assert 'formaction' not in results and 'name="action" value="retry"' in results

    dry = admin.post("/search/bulk", data={"queue": "t2", "action": "retry"}).get_data(as_text=True)
    assert "Retry 60 jobs?" in dry and "On database <strong>skiplock" in dry
    assert 'class="matched">61<' in dry and 'class="applies">60<' in dry
    assert _count(conn, "status = 'dead'") == 60  # the dry run changed nothing

    done = admin.post("/search/bulk", data=_confirm_form(dry))
    assert done.status_code == 303 and done.headers["Location"].endswith("/search/?queue=t2")
    assert _count(conn, "queue = 't2' AND status = 'queued'") == 61
    assert "Retry acted on 60 of the 60 job(s) counted." in _flash(admin, "/search/?queue=t2")
    [(count, detail)] = _audit(conn, "retry search results")
    assert count == 60 and detail["search"] == {"queue": "t2"} and detail["counted"] == 60


@pytest.mark.slow
def test_the_set_is_pinned_to_what_was_counted(admin: Any, conn: Any, dead_from_a_worker: list[int]) -> None:
    dry = admin.post("/search/bulk", data={"queue": "t2", "state": "dead", "action": "purge"}).get_data(as_text=True)
    assert "Purge 60 jobs?" in dry
    # meanwhile: a job of the search dies after the count, and another operator retries one that was counted
    newer = enqueue("t2", {"n": "after the count"}, conn=conn)
    conn.execute("UPDATE jobs SET status = 'dead', finished_at = now() WHERE id = %s", (newer,))
    assert state_changes.retry_finished(conn, [dead_from_a_worker[0]]) == [dead_from_a_worker[0]]

    admin.post("/search/bulk", data=_confirm_form(dry))
    assert "Purge acted on 59 of the 60 job(s) counted; 1 had moved or no longer matched, and were left alone." \
        in _flash(admin, "/search/?queue=t2")
    assert _count(conn, "queue = 't2'") == 2  # the one retried meanwhile, and the one that died after the count
    assert _count(conn, f"id = {newer} AND status = 'dead'") == 1
    assert _audit(conn, "purge search results")[0][0] == 59


def test_cancel_takes_the_queued_jobs_of_the_search_and_nothing_else(admin: Any, conn: Any) -> None:
    enqueue_many([("t9", {"n": n}) for n in range(3)], conn=conn)
    enqueue("t8", {"n": "other queue"}, conn=conn)
    dry = admin.post("/search/bulk", data={"queue": "t9", "action": "cancel"}).get_data(as_text=True)
    assert "Cancel 3 jobs?" in dry
    admin.post("/search/bulk", data=_confirm_form(dry))
    assert _count(conn, "queue = 't9' AND status = 'failed'") == 3
    assert _count(conn, "queue = 't8' AND status = 'queued'") == 1
    # nothing left to cancel: the confirmation says 0 and cannot be sent
    again = admin.post("/search/bulk", data={"queue": "t9", "action": "cancel"}).get_data(as_text=True)
    assert "Cancel 0 jobs?" in again and "disabled>Yes, cancel 0 jobs" in again


def test_a_search_over_the_cap_is_refused_whole(admin: Any, conn: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "BULK_CAP", 5)
    enqueue_many([("t9", {"n": n}) for n in range(6)], conn=conn)
    dry = admin.post("/search/bulk", data={"queue": "t9", "action": "cancel"}).get_data(as_text=True)
    assert "More than 5 jobs match" in dry and 'name="confirm"' not in dry
    forced = admin.post("/search/bulk", data={"queue": "t9", "action": "cancel", "confirm": "yes", "upto": "999999",
                                              "counted": "6"})
    assert forced.status_code == 409
    assert _count(conn, "status = 'queued'") == 6


def test_bad_requests_and_a_read_only_login_change_nothing(admin: Any, viewer: Any, conn: Any) -> None:
    enqueue("t9", {}, conn=conn)
    assert admin.post("/search/bulk", data={"action": "cancel"}).status_code == 400  # no filter: not "everything"
    assert admin.post("/search/bulk", data={"queue": "t9", "action": "explode"}).status_code == 400
    assert admin.post("/search/bulk", data={"queue": "t9", "action": "cancel", "confirm": "yes"}).status_code == 400
    assert admin.post("/search/bulk", data={"queue": "t9", "action": "cancel", "confirm": "yes", "upto": "9",
                                            "counted": "many"}).status_code == 400
    assert viewer.post("/search/bulk", data={"queue": "t9", "action": "cancel", "confirm": "yes",
                                             "upto": "1", "counted": "1"}).status_code == 403
    assert 'value="cancel" class="danger" disabled' in viewer.get("/search/?queue=t9").get_data(as_text=True)
    assert _count(conn, "status = 'queued'") == 1
