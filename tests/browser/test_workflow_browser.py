"""A workflow page in a real browser, at 1440 and 390 px: a workflow run in part by a real worker
process, its DAG drawn as SVG (the wide layer as groups), and "cancel the rest" through its
confirmation page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import skiplock
from tests.browser.conftest import log_in, save_screenshot
from tests.support.helpers import scalar, wait_for

HELD = 15  # children in a queue no worker serves: still queued when the operator cancels the rest
RUN = 3  # children the worker runs


@pytest.mark.parametrize("width", [1440, 390])
def test_a_workflow_page_draws_the_dag_and_cancels_the_rest(page: Any, console: Any, conn: Any, spawn_worker: Any,
                                                           tmp_path: Path, width: int) -> None:
    root = skiplock.enqueue("wfc_step", {"n": 0})
    ran = skiplock.enqueue_many([{"queue": "wfc_step", "payload": {"n": i}, "depends_on": [root]}
                                 for i in range(RUN)])
    held = skiplock.enqueue_many([{"queue": "wfc_hold", "payload": {"n": i}, "depends_on": [root]}
                                  for i in range(HELD)])
    summary = skiplock.enqueue("wfc_step", {"n": -1}, depends_on=[*ran, *held])
    worker = spawn_worker(SKIPLOCK_TASKS="tests.support.console_workflow_handlers", SKIPLOCK_QUEUES="wfc_step")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM job_results WHERE state = 'succeeded'") == 1 + RUN,
             timeout=60, message="the worker to run the root and its children in wfc_step")
    worker.terminate()

    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, console)
    page.goto(f"{console.url}/jobs/{summary}")
    assert page.locator(".waiting-count").inner_text() == f"{HELD} of {RUN + HELD}"
    page.click("a.workflow-link")
    page.wait_for_selector("svg.dag")
    assert page.url.endswith(f"/workflows/{root}")
    assert page.locator("svg.dag g.node[data-job-id]").count() == 2  # the root and the summary
    groups = {page.locator("svg.dag g.node.group").nth(i).get_attribute("data-state"):
              page.locator("svg.dag g.node.group").nth(i).get_attribute("data-count") for i in range(2)}
    assert groups == {"succeeded": str(RUN), "queued": str(HELD)}
    assert page.locator("svg.dag path.edge").count() == 4
    assert page.locator("svg.dag").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # a wide DAG scrolls in its box
    save_screenshot(page, f"workflow-{width}.png", tmp_path)

    page.click("button:has-text('Cancel the rest')")
    page.wait_for_selector("h1#confirm-title")
    assert page.locator(".confirm-count").get_attribute("data-count") == str(HELD + 1)  # + the waiting summary
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'failed'") == 0
    page.click("button:has-text('Yes, cancel the rest')")
    page.wait_for_selector(".flash")
    assert f"cancelled {HELD + 1} job(s)" in page.locator(".flash").inner_text()
    assert page.locator("li.count[data-state=failed] strong").inner_text() == str(HELD + 1)
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'failed'") == HELD + 1
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status IN ('queued', 'waiting')") == 0
