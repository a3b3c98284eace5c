"""In Chromium against gunicorn: dead letters made by a real worker group by exception, and
logging in from /login itself (and again after logging out) lands on the overview, not the form."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import PASSWORD, USER
from tests.console.test_dead_groups_from_a_worker import GROUPS, KINDS, _worker_made_dead_jobs


def _log_in_from_the_login_page(page: Any, url: str) -> None:
    page.goto(url + "/login")
    page.fill("input[name=user]", USER)
    page.fill("input[name=password]", PASSWORD)
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_selector("h1")


def test_login_from_login_page_then_worker_made_groups(page: Any, console: Any, conn: Any, spawn_worker: Any) -> None:
    ids = _worker_made_dead_jobs(conn, spawn_worker)
    _log_in_from_the_login_page(page, console.url)
    assert page.url == console.url + "/", page.url
    assert page.locator("h1").inner_text().startswith("Queues")
    # log out, and in again from the form the logout shows: the overview again
    page.click("form.who button[type=submit]")
    page.wait_for_selector("input[name=password]")
    page.fill("input[name=user]", USER)
    page.fill("input[name=password]", PASSWORD)
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_selector("h1:has-text('Queues')")
    assert page.url == console.url + "/"

    page.goto(console.url + "/dead/?queue=orders")
    groups = page.locator("table.groups tbody tr")
    assert groups.count() == len(KINDS)
    text = page.locator("table.groups").inner_text()
    assert "Traceback (most recent call last)" not in text
    for kind, group in GROUPS.items():
        row = page.locator("table.groups tbody tr", has_text=group)
        assert row.count() == 1, group
        assert row.locator("td.num").inner_text() == str(KINDS[kind])
    page.locator("table.groups a", has_text=GROUPS["connection"]).click()
    page.wait_for_selector(f"tr[data-job-id='{ids['connection'][0]}']")
    assert page.locator("tr[data-job-id]").count() == KINDS["connection"]
