"""Create a job, and edit a scheduled one, in Chromium under gunicorn: the new job is confirmed and a real
worker runs it; an edit made after another operator changed the job is refused with the operator's text kept.
Screenshots at 1440 and 390 px go to docs/img/ with UPDATE_DOCS_IMG=1 (the console and on-call how-tos)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from skiplock import enqueue
from skiplock.core import state_changes
from tests.browser.conftest import log_in
from tests.browser.test_job_inside_browser import WIDTH, doc_screenshot
from tests.support.helpers import scalar, wait_for


@pytest.mark.slow
@pytest.mark.browser
def test_create_a_job_a_worker_runs_and_an_edit_refused_after_a_change(page: Any, console: Any, conn: Any,
                                                                       spawn_worker: Any, tmp_path: Path) -> None:
    spawn_worker(SKIPLOCK_QUEUES="t1", SKIPLOCK_POLL_INTERVAL="0.05")
    log_in(page, console)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.click("a.new-job-link")
    page.fill("#job-queue", "t1")
    page.fill("#job-payload", '{\n  "order": 7001,\n  "to": "ada@example.com"\n}')
    page.fill("#job-priority", "5")
    doc_screenshot(page, "console-job-new-1440.png", tmp_path)
    page.click("button:has-text('Enqueue…')")
    page.wait_for_selector("[data-confirm=create-job]")
    assert "1 job is enqueued on queue t1, priority 5" in page.locator(".confirm").inner_text()
    page.click("button:has-text('Yes, enqueue it')")
    page.wait_for_selector(".flash:has-text('enqueued on queue t1')")
    job = int(page.url.rstrip("/").rsplit("/", 1)[1])
    wait_for(lambda: scalar(conn, "SELECT payload FROM test_effects WHERE job_id = %s", (job,)) ==
             {"order": 7001, "to": "ada@example.com"}, timeout=60, message="the worker to run the new job")

    scheduled = enqueue("t9", {"order": 7002}, run_at=datetime.now(UTC) + timedelta(hours=3))
    page.goto(f"{console.url}/jobs/{scheduled}")
    page.click("a.edit-job-link")
    page.fill("#job-payload", '{"order": 7002, "gift": true}')
    state_changes.run_now(conn, [scheduled])  # another operator, after this form was opened
    page.click("button:has-text('Save…')")
    error = page.locator(".job-form-error")
    assert f"Job {scheduled} changed since you opened it (its run_at)" in error.inner_text()
    assert page.locator("#job-payload").input_value() == '{"order": 7002, "gift": true}'
    assert scalar(conn, "SELECT payload FROM jobs WHERE id = %s", (scheduled,)) == {"order": 7002}
    doc_screenshot(page, "console-job-edit-1440.png", tmp_path)

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{console.url}/jobs/{scheduled}/edit")
    assert page.evaluate(WIDTH) <= 390
    page.fill("#job-priority", "9")
    page.click("button:has-text('Save…')")
    page.wait_for_selector("[data-confirm=edit-job]")
    assert "priority 0 \u2192 9" in page.locator(".confirm").inner_text()
    assert page.evaluate(WIDTH) <= 390
    doc_screenshot(page, "console-job-edit-390.png", tmp_path)
    page.click("button:has-text('Yes, save them')")
    page.wait_for_selector(".flash:has-text('1 change(s)')")
    assert scalar(conn, "SELECT priority FROM jobs WHERE id = %s", (scheduled,)) == 9
    page.goto(f"{console.url}/jobs/new")
    doc_screenshot(page, "console-job-new-390.png", tmp_path)
