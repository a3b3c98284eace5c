"""The Health page's pushed alerts in Chromium under gunicorn: a real worker's firing alert is listed, and
"Send a test alert" is confirmed, then reaches a local webhook (Apprise's json://) and is listed too.
Screenshots at 1440 and 390 px go to docs/img/ with UPDATE_DOCS_IMG=1 (the console and on-call how-tos)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skiplock import enqueue
from tests.browser.conftest import log_in
from tests.browser.test_job_inside_browser import WIDTH, doc_screenshot
from tests.integration.test_alerts import ALERTING, Webhook
from tests.support.helpers import wait_for

HOOK = Webhook()  # one loopback webhook for the module: the console's settings name it before it starts


@pytest.fixture
def console_settings() -> dict[str, str]:
    return {"SKIPLOCK_ALERT_URLS": HOOK.url, "SKIPLOCK_ALERT_DEAD_COUNT": "1"}


@pytest.mark.slow
@pytest.mark.browser
def test_the_rules_the_last_alerts_and_a_test_alert_at_1440_and_390(page: Any, console: Any, conn: Any,
                                                                    spawn_worker: Any, tmp_path: Path) -> None:
    spawn_worker(SKIPLOCK_ALERT_URLS=HOOK.url, SKIPLOCK_QUEUES="t2", **ALERTING)
    enqueue("t2", {"permanent": True}, conn=conn)
    wait_for(lambda: HOOK.count("FIRING", "'t2'"), timeout=60, message="the worker's firing alert")

    log_in(page, console)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(console.url + "/health/")
    panel = page.locator("#alerts")
    assert panel.locator("[data-alerts=on]").is_visible()
    assert panel.locator("tr[data-rule]").count() == 5
    wait_for(lambda: page.reload() or panel.locator("tr[data-kind=firing]").count() >= 1, timeout=30,
             message="the firing alert listed")
    assert "queue 't2' died" in panel.locator("tr[data-kind=firing] .alert-title").first.inner_text()

    before = HOOK.count("test alert")
    page.click("#test-alert")
    page.wait_for_selector("[data-confirm=test-alert]")
    assert "Send a test alert?" in page.locator("h1").inner_text()
    assert HOOK.count("test alert") == before  # nothing sent before the operator says yes
    page.click("button:has-text('Yes, send a test alert')")
    page.wait_for_selector(".flash:has-text('Test alert sent to 1 destination(s)')")
    assert HOOK.count("test alert", "sent by operator") == before + 1
    assert panel.locator("tr[data-kind=test][data-delivered=yes]").count() == 1
    panel.scroll_into_view_if_needed()
    doc_screenshot(page, "console-health-alerts-1440.png", tmp_path)

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    assert page.evaluate(WIDTH) <= 390
    page.locator("#alerts").scroll_into_view_if_needed()
    doc_screenshot(page, "console-health-alerts-390.png", tmp_path)
