"""The queue page's per-tenant limits in Chromium, at 1440 and 390 px: the limits, the tenants at them
(badged), and a page that keeps a phone's width."""

from __future__ import annotations

from typing import Any

import pytest

from skiplock import enqueue
from skiplock.core import state_changes
from skiplock.core.features import limits
from tests.browser.conftest import log_in
from tests.browser.test_small_screens import WIDEST


@pytest.mark.browser
def test_queue_page_shows_per_tenant_limits_and_who_is_at_them(page: Any, console: Any, conn: Any) -> None:
    limits.set_tenant_limit(conn, "imports", concurrency=2, rate="10/s", burst=5)
    for tenant in ("acme-corporation-international", "globex"):
        for _ in range(3):
            enqueue("imports", {"file": "a-rather-long-file-name-to-wrap.csv"}, tenant=tenant)
    # the product's own claim starts each tenant's first two (a worker would run them at once)
    assert len(state_changes.claim(conn, "browser-test", ["imports"], [600.0], 10)) == 4
    log_in(page, console)
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(console.url + "/queues/imports")
        table = page.locator("table.tenants-at-limit")
        table.wait_for()
        text = page.locator("p.per-tenant-limits").inner_text()
        assert "concurrency 2" in text and "rate 10/s" in text, text
        rows = table.locator("tbody tr")
        assert rows.count() == 2
        assert all("at its limit" in t for t in rows.all_inner_texts())
        scroll = page.evaluate("document.documentElement.scrollWidth")
        assert scroll <= width, f"{scroll} px wide on a {width} px screen: {page.evaluate(WIDEST)}"
