"""The console in Chromium at 1440 and 390 px, on data real workers made (issue 36, defects 5, 6, 7, 10):

- at 390 px: the header is short, the overview's dead count, Long-runners' worker and actions and
  Recurring's next and last fire are on screen (cards, not a sideways scroll), chart labels readable;
- at 1440 px: the chart takes the page's width and its "10,000" label is whole; each queue's
  sparkline has its own scale, so a queue of 3 jobs beside one of 6,000 still draws its bars;
- a held live refresh says so, counts the rows that changed, and resumes on its button;
- axe finds no empty table header.
"""

from __future__ import annotations

from typing import Any

from skiplock import enqueue_many
from tests.browser.conftest import log_in
from tests.browser.test_accessibility import AXE
from tests.support.helpers import scalar, wait_for

RECT = "e => { const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, " \
       "bottom: r.bottom, width: r.width, height: r.height}; }"


def _busy_queues(conn: Any, spawn_worker: Any, big: int = 6000) -> None:
    """A worker runs `big` jobs in queue noop and 3 in t1 (same 15-minute bucket), then 3 sleep on t1."""
    # The charts count per 15 minutes of the clock: a drain that crosses a quarter hour splits its count
    # in two (5,000 at the top of the scale, not 10,000), so it starts two minutes or more before the next.
    wait_for(lambda: scalar(conn, "SELECT 900 - mod(extract(epoch FROM now()), 900) >= 120"), timeout=150,
             message="two minutes before the next quarter hour at least")
    enqueue_many([("noop", {}) for _ in range(big)])
    enqueue_many([("t1", {"n": n}) for n in range(3)])
    spawn_worker(SKIPLOCK_QUEUES="noop,t1", SKIPLOCK_CONCURRENCY="8")
    wait_for(lambda: scalar(conn, "SELECT coalesce(sum(completed), 0) FROM job_stats") == big + 3, timeout=180,
             message="the worker to run every job")


def test_charts_fill_the_page_keep_their_labels_and_scale_each_queue(page: Any, console: Any, conn: Any,
                                                                     spawn_worker: Any) -> None:
    _busy_queues(conn, spawn_worker)
    log_in(page, console)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(console.url + "/?range=24h")
    chart = page.locator("figure.chart svg")
    box = chart.evaluate(RECT)
    assert box["width"] >= 1000, box  # not a fixed 634 px on a 1,440 px screen
    top = page.locator("figure.chart svg text.y-label").first
    assert top.text_content() == "10,000"
    label = top.evaluate(RECT)
    assert label["left"] >= box["left"] and label["right"] <= box["right"], (label, box)
    # the small queue's sparkline has its own scale: its bars are drawn tall enough to see
    small = page.locator("tr[data-queue='t1'] svg")
    assert int(small.get_attribute("data-top") or 0) < 10
    heights = small.locator("rect").evaluate_all("rs => rs.map(r => r.getBoundingClientRect().height)")
    assert heights and max(heights) >= 8, heights

    # a phone: the header is short and the chart's labels are readable
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(console.url + "/?range=24h")
    assert page.locator("header").evaluate(RECT)["height"] <= 100
    text = page.locator("figure.chart svg text.y-label").first.evaluate(RECT)
    assert text["height"] >= 9, text
    dead = page.locator("tr[data-queue='noop'] [data-count='dead']").evaluate(RECT)
    assert dead["left"] >= 0 and dead["right"] <= 390, dead  # on screen, not behind a sideways scroll
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_phone_cards_keep_worker_actions_and_fire_times_on_screen(page: Any, console: Any, conn: Any,
                                                                 spawn_worker: Any) -> None:
    enqueue_many([("t1", {"sleep_after": 120, "n": n}) for n in range(3)])
    spawn_worker(SKIPLOCK_TASKS="tests.support.handlers,tests.support.recurring_handlers", SKIPLOCK_QUEUES="t1,rtick")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running' AND queue = 't1'") == 3,
             timeout=60, message="three running jobs")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM recurring_slots") >= 1, timeout=60, message="a fired slot")
    log_in(page, console)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(console.url + "/running/")
    row = page.locator("tr[data-job-id]").first
    card = row.evaluate(RECT)
    assert card["height"] <= 200, card
    for cell in ("worker", "actions"):
        where = row.locator(f"td[data-label='{cell}']").evaluate(RECT)
        assert where["width"] > 0 and where["left"] >= 0 and where["right"] <= 390, (cell, where)
    assert row.locator("td[data-label='actions'] button").first.is_visible()
    page.goto(console.url + "/recurring/")
    row = page.locator("tr[data-schedule='tick']")
    for cell in ("next fires", "last fire"):  # the Recurring page lists the next three fires: the first counts
        where = row.locator(f"td[data-label='{cell}'] time").first.evaluate(RECT)
        assert where["left"] >= 0 and where["right"] <= 390 and where["top"] < 844, (cell, where)
    # the axe rule for empty table headers, on the pages that had them
    for path in ("/dead/", "/running/", "/recurring/"):
        page.goto(console.url + path)
        page.wait_for_selector("main")
        page.evaluate(AXE.read_text() + "\n;0")
        found = page.evaluate("async () => (await axe.run(document, {runOnly: {type: 'rule', "
                              "values: ['empty-table-header']}})).violations.length")
        assert found == 0, path


def test_a_held_refresh_says_so_and_resumes(page: Any, console: Any, conn: Any) -> None:
    first = enqueue_many([("t9", {"n": n}) for n in range(3)])  # no worker serves t9: they stay ready
    log_in(page, console)
    page.goto(console.url + "/prefs?refresh=2&next=/queues/t9")
    page.locator(f"input[name=ids][value='{first[0]}']").check()
    later = enqueue_many([("t9", {"n": n}) for n in range(3, 5)])
    badge = page.locator("#paused-queue-jobs")
    wait_for(lambda: badge.count() == 1 and badge.get_attribute("data-changes") == "2", timeout=30,
             message="the paused badge to count two new rows")
    assert "2 rows have changed since" in badge.inner_text()
    assert page.locator(f"tr[data-job-id='{later[0]}']").count() == 0  # held: not swapped in
    assert page.locator(f"input[name=ids][value='{first[0]}']").is_checked()
    badge.locator("button").click()
    page.locator(f"tr[data-job-id='{later[1]}']").wait_for()
    assert page.locator("#paused-queue-jobs").count() == 0
