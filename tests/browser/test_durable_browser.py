"""Durable jobs in Chromium at 1440 and 390 px, on jobs a real worker parked: the job page (what it is
parked on, its steps and cursors, "send signal" / "wake now") and the Parked view fit the screen, and
"wake now" goes through its confirmation. Screenshots go to the test's folder, and to docs/img/ with
UPDATE_SCREENSHOTS=1 (the how-to shows them).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from tests.browser.conftest import log_in
from tests.browser.test_small_screens import WIDEST
from tests.conftest import REPO
from tests.console.test_durable_console import WORKER, _jobs
from tests.support.helpers import scalar, wait_for

RIGHT = "e => Math.round(e.getBoundingClientRect().right)"


def _shot(page: Any, name: str, tmp_path: Path) -> None:
    page.screenshot(path=str(tmp_path / name), full_page=True)
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        shutil.copy(tmp_path / name, REPO / "docs" / "img" / name)


def test_job_page_and_parked_view_at_1440_and_390(page: Any, console: Any, conn: Any, spawn_worker: Any,
                                                 tmp_path: Path) -> None:
    spawn_worker(**WORKER)
    ids = _jobs(conn)
    log_in(page, console)
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900 if width > 400 else 844})
        page.goto(f"{console.url}/jobs/{ids['waiter']}")
        page.wait_for_selector("#parked-on")
        assert page.locator(".signal-key").inner_text() == "order-1:paid"
        assert page.locator("table.durable-steps tr[data-step^='step-']").count() == 2
        button = page.locator("form.send-signal button")
        assert button.is_visible() and button.evaluate(RIGHT) <= width
        assert page.locator("[data-reason='parked']").is_visible()
        scroll = page.evaluate("document.documentElement.scrollWidth")
        assert scroll <= width, (width, page.evaluate(WIDEST))
        _shot(page, f"console-job-parked-{width}.png", tmp_path)

        page.goto(f"{console.url}/jobs/{ids['sleeper']}")
        page.wait_for_selector("table.durable-cursors")
        assert page.locator("tr[data-cursor='row'] td[data-label='value']").inner_text() == "41"
        assert page.locator("table.durable-steps tr[data-step^='step-']").count() == 3

        page.goto(f"{console.url}/parked/")
        page.wait_for_selector("table.parked-keys")
        assert page.locator("[data-sum='parked']").inner_text() == "4"
        row = page.locator("tr[data-key='order-1:paid']")
        assert row.locator("[data-count='waiting']").inner_text() == "2"
        for cell in row.locator("td").all():  # a card on a phone: every cell on screen
            assert cell.evaluate(RIGHT) <= width
        assert page.evaluate("document.documentElement.scrollWidth") <= width, page.evaluate(WIDEST)
        # in a closed menu on a phone: the marked link, by its text
        assert page.locator("header nav a[aria-current=page]").all_text_contents() == ["Parked"]
        _shot(page, f"console-parked-{width}.png", tmp_path)

    # wake now: a confirmation first, then the worker runs the job again (and its sleep parks it again)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{console.url}/jobs/{ids['sleeper']}")
    page.click("#parked-on form button")
    page.wait_for_selector("[data-confirm='wake']")
    assert "1 job" in page.locator("section.confirm").inner_text()
    runs = "SELECT count(*) FROM test_effects WHERE job_id = %s AND payload ? 'run'"
    assert scalar(conn, runs, (ids["sleeper"],)) == 1
    page.click("section.confirm button[type=submit]")
    page.wait_for_selector("text=woken")
    wait_for(lambda: scalar(conn, runs, (ids["sleeper"],)) == 2, timeout=30, message="the second run")
