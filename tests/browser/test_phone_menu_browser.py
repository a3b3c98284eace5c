"""The console's navigation on a 390 px phone and a 1440 px desktop, in Chromium against gunicorn.

On a phone the nav is a menu: its button shows where you are and the Health badge ("1 fail" here: a real
worker killed the jobs of `orders`, then stopped, and `orders` has ready jobs again), and opened it shows
every entry at once, none behind a sideways scroll. On a desktop it is the one line it was.
Screenshots at both widths go to docs/img/ with UPDATE_DOCS_IMG=1 (docs/howto/console.md)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from skiplock import enqueue_many
from tests.browser.conftest import log_in
from tests.browser.test_on_call_browser import RECT
from tests.conftest import REPO
from tests.console.test_dead_groups_from_a_worker import _worker_made_dead_jobs

ENTRIES = ("Overview", "Long-runners", "Parked", "Run times", "Dead letters", "Search", "Workers", "Recurring",
           "Health", "Audit")
PHONE = {"width": 390, "height": 844}


def _screen_shot(page: Any, name: str, tmp_path: Path) -> None:
    """What the screen shows (not the whole page: the header is the subject); docs/img/ with UPDATE_DOCS_IMG=1."""
    page.screenshot(path=str(tmp_path / name))
    if os.environ.get("UPDATE_DOCS_IMG") == "1":
        shutil.copy(tmp_path / name, REPO / "docs" / "img" / name)


def _on_screen(box: dict[str, float], size: dict[str, int]) -> bool:
    return box["width"] > 0 and box["left"] >= 0 and box["right"] <= size["width"] and box["top"] >= 0 \
        and box["bottom"] <= size["height"]


def _open_menu_if_any(page: Any) -> None:
    """Tap the menu's button, as an operator would, when the page has one on this screen."""
    summary = page.locator("header details summary")
    if summary.count() and summary.is_visible():
        summary.click()


def test_phone_menu_shows_every_entry_and_the_health_badge(page: Any, console: Any, conn: Any, spawn_worker: Any,
                                                           tmp_path: Path) -> None:
    _worker_made_dead_jobs(conn, spawn_worker)  # the worker stops once every job of `orders` is dead
    enqueue_many([("orders", {"kind": "connection", "order": 1})])  # ready, and no live worker: Health fails
    log_in(page, console)

    page.set_viewport_size(PHONE)
    page.goto(console.url + "/dead/")
    page.wait_for_selector("main")
    badge = page.locator("header [data-health=fail]:visible").first
    badge.wait_for()  # the badge is in sight on the closed menu's button, before any tap
    assert badge.inner_text().strip().endswith("1 fail"), badge.inner_text()
    assert _on_screen(badge.evaluate(RECT), PHONE), badge.evaluate(RECT)
    assert page.locator("header").evaluate(RECT)["height"] <= 100  # closed: the header stays short
    _open_menu_if_any(page)
    for label in ENTRIES:
        link = page.locator("header nav a", has_text=label).first
        box = link.evaluate(RECT)
        assert link.is_visible() and _on_screen(box, PHONE), f"{label} is not on a 390 px screen: {box}"
    nav_badge = page.locator("#health-badge")
    assert nav_badge.is_visible() and _on_screen(nav_badge.evaluate(RECT), PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert page.locator("header nav").evaluate("n => n.scrollWidth <= n.clientWidth")  # nothing scrolls sideways
    assert page.locator("header nav a[aria-current=page]").all_inner_texts() == ["Dead letters"]
    _screen_shot(page, "console-menu-390.png", tmp_path)
    page.locator("header nav a", has_text="Audit").click()
    page.wait_for_url(console.url + "/audit/")
    assert not page.locator("header details[data-nav-menu]").evaluate("d => d.open")  # a new page: closed again

    # a desktop keeps its one line: every entry side by side, the badge beside Health, no menu button
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(console.url + "/dead/")
    page.locator("#health-badge[data-health=fail]").wait_for()
    assert not page.locator("header details summary").is_visible()
    tops = {round(page.locator("header nav a", has_text=label).first.evaluate(RECT)["top"]) for label in ENTRIES}
    assert len(tops) == 1, tops
    health = page.locator("header nav a", has_text="Health").evaluate(RECT)
    beside = page.locator("#health-badge").evaluate(RECT)
    assert 0 <= beside["left"] - health["right"] <= 12 and beside["top"] < health["bottom"], (health, beside)
    _screen_shot(page, "console-menu-1440.png", tmp_path)
