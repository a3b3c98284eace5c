"""Keyboard shortcuts in Chromium under gunicorn, on dead jobs a real worker made: "g" then a letter goes to a
page, "/" focuses the search, "j"/"k" move through the rows and "x" selects one, "?" lists the keys, and no
key acts while the operator types in a field. Screenshots at 1440 and 390 px go to docs/img/ with
UPDATE_DOCS_IMG=1 (the console how-to)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skiplock import enqueue_many
from tests.browser.conftest import log_in
from tests.browser.test_job_inside_browser import WIDTH, doc_screenshot
from tests.support.helpers import scalar, wait_for


def _keys_ready(page: Any) -> None:
    """Wait until static/keys.js listens on this page (a deferred script runs after the page is parsed)."""
    page.wait_for_selector("html[data-keys=on]", state="attached")


def _current(page: Any) -> str | None:
    row = page.locator("tr.kb-current")
    return row.get_attribute("data-job-id") if row.count() == 1 else None


@pytest.mark.slow
@pytest.mark.browser
def test_the_keys_move_select_go_and_stay_quiet_while_typing(page: Any, console: Any, conn: Any,
                                                            spawn_worker: Any, tmp_path: Path) -> None:
    enqueue_many([{"queue": "t2", "payload": {"permanent": True, "order": 9100 + n}} for n in range(4)], conn=conn)
    worker = spawn_worker(SKIPLOCK_QUEUES="t2", SKIPLOCK_POLL_INTERVAL="0.05")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'dead'") == 4, timeout=60,
             message="4 dead jobs")
    worker.terminate()

    log_in(page, console)
    page.set_viewport_size({"width": 1440, "height": 900})
    for letter, heading in (("d", "Dead letters"), ("w", "Workers"), ("r", "Recurring"), ("h", "Health"),
                            ("o", "Queues")):
        _keys_ready(page)
        page.keyboard.press("g")
        page.keyboard.press(letter)
        page.wait_for_selector(f"h1:has-text('{heading}')")

    _keys_ready(page)
    page.keyboard.press("/")  # from another page: Search opens with its first field focused
    page.wait_for_selector("form.search")
    wait_for(lambda: page.evaluate("document.activeElement.name") == "id", timeout=10, message="the focus")
    page.keyboard.type("gd jk?x")  # typed into the field, not taken as keys
    assert page.url.endswith("/search/#focus") and page.locator("#keys-help").count() == 0
    assert page.input_value("input[name=id]") == "gd jk?x"

    page.goto(console.url + "/dead/")
    ids = [row.get_attribute("data-job-id") for row in page.locator("main tbody tr[data-job-id]").all()]
    assert len(ids) == 4
    _keys_ready(page)
    page.keyboard.press("j")
    assert _current(page) == ids[0]
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    assert _current(page) == ids[1]
    page.keyboard.press("x")
    assert page.locator(f"tr[data-job-id='{ids[1]}'] input[type=checkbox]").is_checked()
    page.keyboard.press("?")
    help_box = page.locator("#keys-help")
    assert help_box.is_visible()
    listed = help_box.locator("dt").all_inner_texts()
    assert {"/", "?", "g then o", "g then d", "g then r", "g then w", "g then h", "j", "k", "x"} <= set(listed)
    doc_screenshot(page, "console-keys-1440.png", tmp_path)
    page.keyboard.press("Escape")
    assert help_box.count() == 0
    page.keyboard.press("Enter")  # the current row's link has the focus: Enter opens the job
    page.wait_for_url(f"**/jobs/{ids[1]}")

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(console.url + "/dead/")
    _keys_ready(page)
    page.keyboard.press("j")
    page.keyboard.press("?")
    assert page.locator("#keys-help").is_visible() and page.evaluate(WIDTH) <= 390
    doc_screenshot(page, "console-keys-390.png", tmp_path)
