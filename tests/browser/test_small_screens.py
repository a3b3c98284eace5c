"""On a 390 px phone the pages keep the viewport's width (wide tables scroll inside themselves), the
nav marks the current area (aria-current) and a skip link leads past the header to the content."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import log_in
from tests.console.test_dead_groups_from_a_worker import _worker_made_dead_jobs
from tests.support.helpers import scalar

# the elements that stick out, to say what to fix when a page is too wide
WIDEST = """() => Array.from(document.querySelectorAll('body *'))
  .filter(e => e.getBoundingClientRect().right > 391)
  .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"""


def test_pages_fit_a_phone_and_the_nav_says_where_you_are(page: Any, console: Any, conn: Any,
                                                        spawn_worker: Any) -> None:
    ids = _worker_made_dead_jobs(conn, spawn_worker)  # long headlines and tracebacks from a real worker
    log_in(page, console)
    page.set_viewport_size({"width": 390, "height": 844})
    for path, current in (("/", "Overview"), ("/dead/?queue=orders&window=all", "Dead letters"),
                          ("/running/", "Long-runners"), ("/queues/orders?status=dead", None),
                          (f"/jobs/{ids['connection'][0]}", None), ("/workers/", "Workers"),
                          ("/recurring/", "Recurring"), ("/health", "Health")):
        page.goto(console.url + path)
        page.wait_for_selector("main")
        width = page.evaluate("document.documentElement.scrollWidth")
        wide = page.evaluate(WIDEST) if width > 390 else []
        assert width <= 390, f"{path} is {width} px wide on a 390 px screen: {wide}"
        # on a phone the nav is in a closed menu: the link is marked, and the menu's button names the area
        marked = [t.strip() for t in page.locator("header nav a[aria-current=page]").all_text_contents()]
        assert marked == ([current] if current else []), (path, marked)
        here = page.locator("header details summary .menu-here").all_inner_texts()
        assert [t.strip(" ·") for t in here] == marked, (path, here)

    # the skip link is the first thing the keyboard reaches, and it lands in <main>
    page.goto(console.url + "/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"


# the right edge of every shown cell of a jobs table's first row, and the labels of those cells
FIRST_ROW_CELLS = """() => Array.from(document.querySelectorAll('table.jobs tbody tr:first-child td'))
  .filter(td => td.offsetParent !== null)
  .map(td => [td.dataset.label, Math.round(td.getBoundingClientRect().right)])"""


def test_job_lists_are_cards_on_a_phone_with_every_cell_on_screen(page: Any, console: Any, conn: Any,
                                                                  spawn_worker: Any) -> None:
    # a search's results and a queue's job list share templates/_jobs_table.html; in a box that scrolled
    # sideways, a phone showed id, queue, status and priority, and the error and payload were off screen
    _worker_made_dead_jobs(conn, spawn_worker)
    log_in(page, console)
    page.set_viewport_size({"width": 390, "height": 844})
    for path in ("/search/?queue=orders&state=dead", "/queues/orders?status=dead"):
        page.goto(console.url + path)
        page.wait_for_selector("table.jobs tbody tr")
        cells = page.evaluate(FIRST_ROW_CELLS)
        labels = [label for label, _ in cells]
        assert {"id", "status", "attempts", "last error", "payload"} <= set(labels), (path, labels)
        assert "tenant" not in labels  # no tenant: the empty cell is left out of the card
        assert all(right <= 390 for _, right in cells), (path, cells)
        # the card shows its own job's stored headline. Which job is first is each page's own order: search
        # lists newest id first, a queue's dead tab the most recently dead first (finished_at DESC, id DESC),
        # and the worker's threads end these jobs in any order, so the two pages' first rows may differ
        first = int(page.locator("table.jobs tbody tr:first-child").get_attribute("data-job-id") or 0)
        newest = {"/search/": "SELECT max(id) FROM jobs WHERE status = 'dead'",
                  "/queues/": "SELECT id FROM jobs WHERE status = 'dead' ORDER BY finished_at DESC, id DESC LIMIT 1"}
        assert first == scalar(conn, newest[path[:path.index("/", 1) + 1]]), path
        error = page.locator("table.jobs tbody tr:first-child td[data-label='last error']").inner_text()
        assert error == scalar(conn, "SELECT error_headline FROM jobs WHERE id = %s", (first,))
