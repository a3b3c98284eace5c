"""Bulk retry on what a search found, in Chromium under gunicorn, on dead jobs a real worker made: the
search shows one page, the dry run counts every page, the confirmation names the database, and the retried
jobs run again. Screenshots at 1440 and 390 px go to docs/img/ with UPDATE_DOCS_IMG=1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skiplock import enqueue_many
from tests.browser.conftest import log_in
from tests.browser.test_job_inside_browser import WIDTH, doc_screenshot
from tests.support.helpers import scalar, wait_for


def _dead(conn: Any) -> int:
    return int(scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 't2' AND status = 'dead'"))


@pytest.mark.slow
@pytest.mark.browser
def test_retry_every_dead_job_a_search_found_at_1440_and_390(page: Any, console: Any, conn: Any,
                                                             spawn_worker: Any, tmp_path: Path) -> None:
    enqueue_many([{"queue": "t2", "payload": {"permanent": True, "order": 8000 + n}} for n in range(55)], conn=conn)
    worker = spawn_worker(SKIPLOCK_QUEUES="t2", SKIPLOCK_POLL_INTERVAL="0.05")
    wait_for(lambda: _dead(conn) == 55, timeout=90, message="55 dead jobs")
    worker.terminate()

    log_in(page, console)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(console.url + "/search/?queue=t2&state=dead")
    assert page.locator("#search-results tbody tr[data-job-id]").count() == 50  # one page of 55
    page.click("form.bulk-search button[value=retry]")
    confirm = page.locator("[data-confirm=bulk-retry]")
    assert confirm.get_attribute("data-count") == "55"
    assert "On database skiplock" in confirm.inner_text()
    doc_screenshot(page, "console-search-bulk-1440.png", tmp_path)
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate(WIDTH) <= 390
    doc_screenshot(page, "console-search-bulk-390.png", tmp_path)

    page.click("button:has-text('Yes, retry 55 jobs')")
    page.wait_for_selector(".flash:has-text('Retry acted on 55 of the 55 job(s) counted.')")
    assert _dead(conn) == 0
    # a worker runs each retried job again (its handler fails it for good again: a second run each)
    spawn_worker(SKIPLOCK_QUEUES="t2", SKIPLOCK_POLL_INTERVAL="0.05")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE queue = 't2'") == 110, timeout=90,
             message="the retried jobs to run again")
