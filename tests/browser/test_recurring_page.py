"""The Recurring page, with a schedule a real worker registered and fired: times say their zone,
and the row's action buttons stay inside their cell at 1440 and inside the row's card at 390 pixels wide."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import log_in
from tests.support.helpers import scalar, wait_for


def test_recurring_rows_keep_their_layout_and_label_times(page: Any, console: Any, conn: Any,
                                                         spawn_worker: Any) -> None:
    spawn_worker(SKIPLOCK_TASKS="tests.support.handlers,tests.support.recurring_handlers")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM recurring_slots WHERE name = 'tick'") >= 1, timeout=60,
             message="the scheduler to fire a slot")
    log_in(page, console)
    for width, height in ((1440, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(console.url + "/recurring/")
        row = page.locator("tr[data-schedule='tick']")
        row.wait_for()
        if width > 600:
            assert row.locator("td.row-actions").evaluate("td => getComputedStyle(td).display") == "table-cell"
            tops = row.locator("td").evaluate_all("tds => tds.map(td => Math.round(td.getBoundingClientRect().top))")
            assert len(set(tops)) == 1, tops  # every cell of the row starts on the same line
        else:  # a phone: the row is a card (issue 36), its buttons inside it and on screen
            card = row.evaluate("r => r.getBoundingClientRect().toJSON()")
            buttons = row.locator("td.row-actions button").evaluate_all(
                "bs => bs.map(b => b.getBoundingClientRect().toJSON())")
            assert buttons and all(card["left"] <= b["left"] and b["right"] <= min(card["right"], width)
                                   and card["top"] <= b["top"] and b["bottom"] <= card["bottom"] for b in buttons)
        times = row.locator("time").all_inner_texts()
        assert times and all(t.endswith(" UTC") for t in times), times
