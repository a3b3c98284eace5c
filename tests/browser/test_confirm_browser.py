"""Every console action that destroys, stops or starts work asks first, in Chromium against gunicorn, on data
real workers made: dead jobs from a worker whose handlers raise, a job running on a live worker, a schedule
that worker fires. Each confirmation names the count, the database and what will happen, and nothing changes
until the operator confirms. Screenshots at 1440 and 390 px go to docs/img/ with UPDATE_DOCS_IMG=1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skiplock import enqueue_many
from tests.browser.conftest import log_in
from tests.browser.test_job_inside_browser import doc_screenshot
from tests.console.test_dead_groups_from_a_worker import _worker_made_dead_jobs
from tests.support.helpers import scalar, wait_for


def _status(conn: Any, job_id: int) -> str | None:
    return scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,))


def _asks(page: Any, title: str, database: str) -> str:
    """The confirmation page is shown: its title, the database; its text."""
    page.wait_for_selector("section.confirm")
    assert page.locator("#confirm-title").inner_text() == title
    assert page.locator("section.confirm [data-database]").inner_text() == database
    return str(page.locator("section.confirm").inner_text())


def test_job_dead_letter_and_schedule_actions_confirm_first(page: Any, console: Any, conn: Any, spawn_worker: Any,
                                                            tmp_path: Path) -> None:
    database = conn.info.dbname
    dead = _worker_made_dead_jobs(conn, spawn_worker)["connection"]  # a worker ran them; its handlers raised
    running, = enqueue_many([("t1", {"sleep_after": 120})])
    queued, = enqueue_many([("nobody", {"n": 1})])  # no worker serves `nobody`: it stays queued
    spawn_worker(SKIPLOCK_TASKS="tests.support.handlers,tests.support.recurring_handlers", SKIPLOCK_QUEUES="t1,rtick")
    wait_for(lambda: _status(conn, running) == "running", timeout=60, message="the job to run")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM recurring_slots") >= 1, timeout=60, message="a fired slot")
    log_in(page, console)
    page.set_viewport_size({"width": 1440, "height": 900})

    # Purge on a dead job's page: asked, then done
    page.goto(f"{console.url}/jobs/{dead[0]}")
    page.locator("div.actions button", has_text="Purge").click()
    text = _asks(page, f"Purge job {dead[0]}?", database)
    assert f"1 job: job {dead[0]} of queue orders, dead" in text and "deleted for good" in text
    assert _status(conn, dead[0]) == "dead"
    doc_screenshot(page, "console-confirm-1440.png", tmp_path)
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    doc_screenshot(page, "console-confirm-390.png", tmp_path)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.locator("section.confirm button[type=submit]").click()
    page.wait_for_selector("h1:has-text('Dead letters')")
    assert _status(conn, dead[0]) is None

    # Retry starts work: asked too
    page.goto(f"{console.url}/jobs/{dead[1]}")
    page.locator("div.actions button", has_text="Retry").click()
    assert "runs again as soon as a worker is free" in _asks(page, f"Retry job {dead[1]}?", database)
    assert _status(conn, dead[1]) == "dead"

    # Cancel on a queued job's page, Release and Cancel on a running job's page
    page.goto(f"{console.url}/jobs/{queued}")
    page.locator("div.actions button", has_text="Cancel").click()
    assert "never runs" in _asks(page, f"Cancel job {queued}?", database)
    page.locator("section.confirm a", has_text="No, go back").click()
    page.wait_for_url(f"{console.url}/jobs/{queued}")
    assert _status(conn, queued) == "queued"
    page.goto(f"{console.url}/jobs/{running}")
    page.locator("div.actions button", has_text="Release").click()
    assert "is NOT stopped" in _asks(page, f"Release job {running}?", database)
    page.goto(f"{console.url}/jobs/{running}")
    page.locator("div.actions button", has_text="Cancel").click()
    _asks(page, f"Cancel running job {running}?", database)
    assert _status(conn, running) == "running"
    assert scalar(conn, "SELECT cancel_requested_at IS NULL FROM jobs WHERE id = %s", (running,))

    # a row's purge on Dead letters
    page.goto(f"{console.url}/dead/?queue=orders")
    page.locator(f"tr[data-job-id='{dead[2]}'] button", has_text="purge").click()
    assert "1 job" in _asks(page, "Purge 1 job?", database)
    assert _status(conn, dead[2]) == "dead"
    page.locator("section.confirm button[type=submit]").click()
    page.wait_for_selector("h1:has-text('Dead letters')")
    assert _status(conn, dead[2]) is None

    # pause and run now on Recurring
    page.goto(f"{console.url}/recurring/")
    page.locator("tr[data-schedule='tick'] button", has_text="pause").click()
    assert "stops firing until resumed" in _asks(page, "Pause schedule tick?", database)
    assert scalar(conn, "SELECT enabled FROM recurring_schedules WHERE name = 'tick'") is True
    page.goto(f"{console.url}/recurring/")
    page.locator("tr[data-schedule='tick'] button", has_text="run now").click()
    assert "1 job of queue rtick is enqueued now" in _asks(page, "Run schedule tick now?", database)
    manual = "SELECT count(*) FROM recurring_slots WHERE manual"
    assert scalar(conn, manual) == 0
    page.locator("section.confirm button[type=submit]").click()
    page.wait_for_selector("h1:has-text('Recurring')")
    assert scalar(conn, manual) == 1
