"""The queue page's per-tenant limits form in Chromium against gunicorn: filled and submitted at 1440 px, the
limits are stored and shown; at 390 px the form keeps the phone's width."""

from __future__ import annotations

from typing import Any

import pytest

from skiplock import enqueue
from skiplock.core.features import limits
from tests.browser.conftest import log_in
from tests.browser.test_small_screens import WIDEST

FORM = "form.per-tenant-form"


@pytest.mark.browser
def test_per_tenant_limits_set_from_the_queue_page(page: Any, console: Any, conn: Any) -> None:
    limits.set_limit(conn, "imports", concurrency=20, rate=None, actor="cli:alice")
    enqueue("imports", {"file": "a.csv"}, tenant="acme")
    log_in(page, console)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(console.url + "/queues/imports")
    assert "No per-tenant limit. Set one here" in page.locator("section.flow").inner_text()
    page.locator(f"{FORM} input[name=tenant_concurrency]").fill("3")
    page.locator(f"{FORM} input[name=tenant_rate]").fill("10/s")
    page.locator(f"{FORM} button", has_text="Set per-tenant limits").click()
    page.wait_for_selector("div.flash.message")  # no confirmation: a limit neither destroys nor starts work
    flash = page.locator("div.flash.message").inner_text()
    assert "Each tenant of queue imports limited to concurrency 3 and rate 10/s" in flash, flash
    shown = page.locator("p.per-tenant-limits").inner_text()
    assert "concurrency 3" in shown and "rate 10/s" in shown, shown
    assert page.locator(f"{FORM} input[name=tenant_concurrency]").input_value() == "3"
    [row] = limits.list_limits(conn)
    assert (row.concurrency, row.tenant_concurrency, row.tenant_rate) == (20, 3, 10.0)  # the global one kept

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(console.url + "/queues/imports")
    form = page.locator(FORM)
    form.scroll_into_view_if_needed()
    box = form.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    for button in ("Set per-tenant limits", "Remove per-tenant limits"):
        edge = form.locator("button", has_text=button).bounding_box()
        assert edge is not None and edge["x"] + edge["width"] <= 390, (button, edge)
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= 390, f"{scroll} px wide on a 390 px screen: {page.evaluate(WIDEST)}"
