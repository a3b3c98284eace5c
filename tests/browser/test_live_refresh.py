"""Live refresh keeps what the operator is doing (Chromium against gunicorn, real worker jobs).

- A ticked checkbox on /running/ survives three polls (polling is held while a selection exists,
  and a refresh keeps the ticks), so "Release selected" works.
- An open <details> on Health stays open across polls, and a closed one stays closed.
- Focus stays on the link it was on across polls.
- Arrow keys on the refresh selector do not reload the page; Enter applies the choice.
Polls are counted from htmx's own events and the fragment responses, never by sleeping.
"""

from __future__ import annotations

from typing import Any

from skiplock import enqueue_many
from tests.browser.conftest import log_in
from tests.support.helpers import scalar, wait_for

COUNT_POLLS = """() => {
  window.__polls = 0; window.__swaps = 0;
  document.addEventListener("htmx:beforeRequest",
    e => { if (e.detail.elt.hasAttribute("data-poll")) window.__polls++; });
  document.addEventListener("htmx:afterSettle", () => { window.__swaps++; });
}"""


def _polls(page: Any) -> int:
    return int(page.evaluate("window.__polls"))


def _swaps(page: Any) -> int:
    return int(page.evaluate("window.__swaps"))


def test_live_refresh_keeps_selection_details_and_focus(page: Any, console: Any, conn: Any, spawn_worker: Any) -> None:
    enqueue_many([("t1", {"sleep_after": 60, "n": n}) for n in range(3)])
    spawn_worker(SKIPLOCK_QUEUES="t1")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == 3, timeout=60,
             message="three running jobs")
    log_in(page, console)
    page.goto(console.url + "/prefs?refresh=2&next=/running/")
    page.wait_for_selector("input[name=ids]")
    page.evaluate(COUNT_POLLS)

    # a ticked box: three poll ticks come and go, the box stays ticked and the rows stay
    box = page.locator("input[name=ids]").first
    value = box.get_attribute("value")
    box.check()
    wait_for(lambda: _polls(page) >= 3, timeout=30, message="three poll ticks")
    assert page.locator(f"input[name=ids][value='{value}']").is_checked()
    # untick: polling resumes and swaps the fragment again
    box.uncheck()
    page.locator("h1").click()  # focus out of the fragment's form
    swaps = _swaps(page)
    wait_for(lambda: _swaps(page) > swaps, timeout=30, message="polling to resume once nothing is selected")

    # details on Health: open and closed states survive three swaps
    page.goto(console.url + "/health")
    page.wait_for_selector("details")
    page.evaluate(COUNT_POLLS)
    details = page.locator("details[data-key]")
    first_key = details.first.get_attribute("data-key")
    was_open = details.first.evaluate("d => d.open")
    details.first.locator("summary").click()  # flip it
    page.locator("h1").click()
    wait_for(lambda: _swaps(page) >= 3, timeout=30, message="three refreshes of Health")
    assert page.locator(f"details[data-key='{first_key}']").evaluate("d => d.open") is (not was_open)

    # focus on a link inside a live fragment stays there across swaps
    page.goto(console.url + "/")
    page.wait_for_selector("#overview a")
    page.evaluate(COUNT_POLLS)
    link = page.locator("#overview a").first
    href = link.get_attribute("href")
    link.focus()
    wait_for(lambda: _swaps(page) >= 3, timeout=30, message="three refreshes of the overview")
    assert page.evaluate("document.activeElement && document.activeElement.getAttribute('href')") == href

    # the refresh selector: arrow keys move through the choices without reloading; Enter applies
    page.evaluate("window.__still_here = true")
    select = page.locator("select[name=refresh]")
    select.focus()
    page.keyboard.press("ArrowDown")
    assert page.evaluate("window.__still_here === true")
    chosen = select.input_value()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator("select[name=refresh]").input_value() == chosen
