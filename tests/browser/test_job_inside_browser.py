"""Inside a job, in Chromium under gunicorn, on jobs real workers ran: the lines its handler logged, per
attempt, on its page and its timeline, found by the console's search; and a running job's stack on request.
Screenshots at 1440 and 390 px go to docs/img/ with UPDATE_DOCS_IMG=1 (the console and on-call how-tos)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from skiplock import enqueue
from tests.browser.conftest import log_in, save_screenshot
from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for

WORKER = {"SKIPLOCK_TASKS": "tests.support.logging_handlers", "PYTHONPATH": str(REPO),
          "SKIPLOCK_HISTORY_MODE": "keep", "SKIPLOCK_POLL_INTERVAL": "0.05", "SKIPLOCK_HEARTBEAT_INTERVAL": "0.5",
          "SKIPLOCK_BACKOFF_BASE": "0.05", "SKIPLOCK_BACKOFF_CAP": "0.05"}
WIDTH = "() => document.documentElement.scrollWidth"


# The stack panel polls and swaps itself (htmx outerHTML) until its stack is taken: scroll inside the page,
# in one step, rather than through a handle that a swap may detach between finding and scrolling.
SCROLL_TO_STACK = "document.getElementById('stack').scrollIntoView({block: 'nearest'})"

def doc_screenshot(page: Any, name: str, tmp_path: Path) -> None:
    """The test's own screenshot; also docs/img/<name> with UPDATE_DOCS_IMG=1."""
    save_screenshot(page, name, tmp_path)
    if os.environ.get("UPDATE_DOCS_IMG") == "1":
        shutil.copy(tmp_path / name, REPO / "docs" / "img" / name)


def _status(conn: Any, job_id: int) -> str:
    return str(scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)))


@pytest.mark.slow
@pytest.mark.browser
def test_the_handlers_log_lines_on_its_page_its_timeline_and_in_search(page: Any, console: Any, conn: Any,
                                                                       spawn_worker: Any, tmp_path: Path) -> None:
    job = enqueue("logs_sync", {"order": 9001, "fail": True}, max_attempts=2)
    other = enqueue("logs_sync", {"order": 9002})
    spawn_worker(SKIPLOCK_QUEUES="logs_sync", **WORKER)
    wait_for(lambda: _status(conn, job) == "dead" and _status(conn, other) == "succeeded", timeout=60,
             message="the jobs to end")

    log_in(page, console)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{console.url}/jobs/{job}")
    blocks = page.locator(".job-log")
    assert [blocks.nth(i).get_attribute("data-attempt") for i in range(blocks.count())] == ["1", "2"]
    text = page.locator("#logs-2 pre.log-lines").inner_text()
    assert "WARNING shop.orders: card declined once for order 9001, trying again" in text
    assert "ValueError: gateway said no" in text and "from a side thread" not in text
    # each attempt on the timeline links to its lines
    link = page.locator("li.step[data-attempt='1'] a.step-logs")
    assert link.inner_text() == "3 log lines" and link.get_attribute("href") == "#logs-1"
    doc_screenshot(page, "console-job-logs-1440.png", tmp_path)

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    assert page.evaluate(WIDTH) <= 390  # nothing cut on a phone: long lines wrap
    page.locator("#logs").scroll_into_view_if_needed()
    doc_screenshot(page, "console-job-logs-390.png", tmp_path)

    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{console.url}/search/?log=order+9001")
    ids = page.locator("#search-results tbody tr a[href*='/jobs/']")
    found = {ids.nth(i).inner_text().strip() for i in range(ids.count())}
    assert found == {str(job)}
    page.goto(f"{console.url}/search/?log=card+declined")
    ids = page.locator("#search-results tbody tr a[href*='/jobs/']")
    assert {ids.nth(i).inner_text().strip() for i in range(ids.count())} == {str(job), str(other)}


@pytest.mark.slow
@pytest.mark.browser
def test_show_stack_of_a_running_job_at_1440_and_390(page: Any, console: Any, conn: Any, spawn_worker: Any,
                                                     tmp_path: Path) -> None:
    job = enqueue("stack_sync", {"seconds": 120})
    # a long heartbeat: the stack comes sooner than the next one
    spawn_worker(SKIPLOCK_QUEUES="stack_sync", **{**WORKER, "SKIPLOCK_HEARTBEAT_INTERVAL": "20"})
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (job,)) == 1,
             timeout=60, message="the handler to start")

    log_in(page, console)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{console.url}/jobs/{job}")
    page.click("button.show-stack")
    page.wait_for_selector("pre.stack", timeout=15000)  # the panel asks again every second until it is taken
    stack = page.locator("pre.stack").inner_text()
    assert "in stack_sync" in stack and "in wait_for_the_gateway" in stack
    assert stack.rindex("in wait_for_the_gateway") > stack.rindex("in stack_sync")  # innermost last
    taken = page.locator(".stack-taken").inner_text()
    assert taken.startswith("Stack of attempt 1 on ") and " UTC" in taken and "asked by" in taken
    assert scalar(conn, "SELECT count(*) FROM audit_log WHERE action = 'show stack'") == 1
    # only the panel was replaced: the rest of the job page is still there around it
    assert page.locator("dl.job").count() == 1 and page.locator("ol.timeline").count() == 1
    assert page.locator("#job #stack").count() == 1
    assert _status(conn, job) == "running"  # read-only: the run goes on
    page.evaluate(SCROLL_TO_STACK)
    doc_screenshot(page, "console-job-stack-1440.png", tmp_path)

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    page.click("button.show-stack")  # again: a new request replaces the earlier one
    page.wait_for_selector("pre.stack", timeout=15000)
    assert page.locator("dl.job").count() == 1
    assert page.evaluate(WIDTH) <= 390
    page.evaluate(SCROLL_TO_STACK)
    doc_screenshot(page, "console-job-stack-390.png", tmp_path)
    assert scalar(conn, "SELECT count(*) FROM audit_log WHERE action = 'show stack'") == 2
