"""Edit and retry in Chromium at 1440 px, and the job's timeline at 390 px, on jobs real workers ran (issue 36):
the operator fixes a dead job's payload in the form (a typo first: the message, and the text kept), the same
worker runs it with the new payload; on a phone the timeline is a column, whole on screen, in light and dark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skiplock import enqueue
from tests.browser.conftest import log_in, save_screenshot
from tests.support.helpers import scalar, wait_for

WORKER = {"SKIPLOCK_QUEUES": "t1", "SKIPLOCK_HISTORY_MODE": "keep", "SKIPLOCK_POLL_INTERVAL": "0.05",
          "SKIPLOCK_BACKOFF_BASE": "0.05", "SKIPLOCK_BACKOFF_CAP": "0.05"}
RIGHT = "e => e.getBoundingClientRect().right"


def _status(conn: Any, job_id: int) -> str:
    return str(scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)))


@pytest.mark.slow
@pytest.mark.browser
def test_edit_and_retry_at_1440_and_the_timeline_at_390(page: Any, console: Any, conn: Any, spawn_worker: Any,
                                                        tmp_path: Path) -> None:
    # fails twice, then dies on the third attempt: a timeline with three failed runs
    job = enqueue("t1", {"fail_times": 3, "to": "old@example.com"}, max_attempts=3)
    spawn_worker(**WORKER)
    wait_for(lambda: _status(conn, job) == "dead", timeout=60, message="the job to die")

    log_in(page, console)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{console.url}/jobs/{job}")
    page.click("a.edit-retry-link")
    box = page.locator("#edit-payload")
    box.wait_for(state="visible")  # the link loads the page again (?edit=1): wait for it, do not race it
    assert '"old@example.com"' in box.input_value()
    box.fill('{"to": "new@example.com",')  # a typo: refused with the message, the text kept
    page.click("button:has-text('Save payload and retry')")
    page.wait_for_selector(".edit-error")
    assert "not valid JSON" in page.locator(".edit-error").inner_text()
    assert page.locator("#edit-payload").input_value() == '{"to": "new@example.com",'
    assert _status(conn, job) == "dead"
    save_screenshot(page, "job-edit-retry-1440.png", tmp_path)

    page.locator("#edit-payload").fill('{"to": "new@example.com"}')
    page.click("button:has-text('Save payload and retry')")
    page.wait_for_selector(".flash:has-text('retried with the edited payload')")
    wait_for(lambda: _status(conn, job) == "succeeded", timeout=60, message="the edited job to succeed")
    assert scalar(conn, "SELECT payload FROM test_effects WHERE job_id = %s ORDER BY at DESC LIMIT 1",
                  (job,)) == {"to": "new@example.com"}
    page.reload()
    steps = page.locator("ol.timeline li.step")
    kinds = [steps.nth(i).get_attribute("data-kind") for i in range(steps.count())]
    assert kinds == ["enqueued", "attempt", "attempt", "attempt", "edit", "attempt", "final"], kinds
    page.locator("details:has-text('original payload') summary").first.click()
    assert "old@example.com" in page.locator("pre.original-payload").inner_text()
    assert page.locator("#edit-payload").count() == 0  # succeeded: nothing left to edit
    # at 1440 px the steps sit on one line
    tops = {round(steps.nth(i).bounding_box()["y"]) for i in range(steps.count())}
    assert len(tops) == 1, tops
    save_screenshot(page, "job-timeline-1440.png", tmp_path)
    # the queue's failure-rate chart: 3 of the 4 runs failed
    page.goto(f"{console.url}/queues/t1")
    assert "75.0% of 4 runs failed" in page.locator("#failure-rate figcaption").inner_text()
    save_screenshot(page, "queue-failure-rate-1440.png", tmp_path)

    # a phone: the timeline is a column, every step whole on screen, the page no wider than the screen
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{console.url}/jobs/{job}")
        timeline = page.locator("ol.timeline")
        timeline.scroll_into_view_if_needed()
        assert timeline.is_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        for i in range(steps.count()):
            step = steps.nth(i)
            assert step.is_visible() and step.evaluate(RIGHT) <= 390, (i, step.evaluate(RIGHT))
        lefts = {round(steps.nth(i).bounding_box()["x"]) for i in range(steps.count())}
        assert len(lefts) == 1, lefts  # one column
        # the text follows the scheme: light text on the dark surface, dark on the light one
        color = page.locator("ol.timeline .step-title").first.evaluate("e => getComputedStyle(e).color")
        assert color == ("rgb(228, 231, 238)" if scheme == "dark" else "rgb(29, 35, 48)"), (scheme, color)
        save_screenshot(page, f"job-timeline-390-{scheme}.png", tmp_path)
    # and the queue's failure-rate chart keeps to the phone's width
    page.goto(f"{console.url}/queues/t1")
    chart = page.locator("#failure-rate svg")
    assert chart.is_visible() and chart.evaluate(RIGHT) <= 390
    save_screenshot(page, "queue-failure-rate-390.png", tmp_path)
