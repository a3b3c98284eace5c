"""A runtime schedule made, fired, changed, paused, backfilled and deleted from the Recurring page in Chromium,
at 1440 and 390 pixels wide, against gunicorn and a real worker: the worker's scheduler fires its slots (they
show on its row), each change is on the audit trail, and the code-defined schedule beside it has no edit."""

from __future__ import annotations

import re
from typing import Any

from tests.browser.conftest import log_in
from tests.support.helpers import scalar, wait_for


def _row(page: Any, console: Any, name: str) -> Any:
    page.goto(console.url + "/recurring/")
    return page.locator(f"tr[data-schedule='{name}']")


def _has_run(page: Any, console: Any, name: str) -> bool:
    """Whether the schedule's row shows a finished run (ok, or done when the job was not kept)."""
    runs = _row(page, console, name).locator(".recent-runs [data-run-state=succeeded], "
                                             ".recent-runs [data-run-state=gone]")
    return bool(runs.count() > 0)


def test_a_runtime_schedule_from_the_page_fires_and_is_changed_paused_backfilled_and_deleted(
        page: Any, console: Any, conn: Any, spawn_worker: Any) -> None:
    spawn_worker(SKIPLOCK_TASKS="tests.support.handlers,tests.support.recurring_handlers")
    log_in(page, console)
    for width, height in ((1440, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        _make_fire_change_pause_backfill_and_delete(page, console, conn, f"ui:{width}", width)
    assert "Traceback" not in console.log()


def _confirm(page: Any) -> None:
    """Pause, backfill and delete ask first (count, database, what will happen): the operator says yes."""
    page.wait_for_selector("section.confirm")
    page.locator("section.confirm button[type=submit]").click()


def _make_fire_change_pause_backfill_and_delete(page: Any, console: Any, conn: Any, name: str, width: int) -> None:
    """One round trip of a runtime schedule through the page, at the viewport's width."""
    page.goto(console.url + "/recurring/")
    form = page.locator("form.schedule-new")
    form.locator("input[name=name]").fill(name)
    form.locator("input[name=queue]").fill("t1")
    form.locator("select[name=kind]").select_option("interval")
    form.locator("input[name=when]").fill("1s")
    form.locator("input[name=tenant]").fill("acme")
    form.locator("input[name=payload]").fill(f'{{"width": {width}}}')
    form.locator("button").click()
    page.wait_for_selector(f"text=Schedule {name} created")
    row = page.locator(f"tr[data-schedule='{name}']")
    assert row.locator("[data-origin=runtime]").count() == 1 and "every 1 second" in row.inner_text()

    # the worker's scheduler fires its slots, and a finished run shows on the row
    wait_for(lambda: _has_run(page, console, name), timeout=60,
             message="a slot fired by the worker's scheduler on the row")
    assert scalar(conn, "SELECT count(*) FROM test_effects e JOIN recurring_slots s ON s.job_id = e.job_id "
                        "WHERE s.name = %s AND NOT s.manual", (name,)) >= 1

    # code-defined: marked, no edit link, and its edit page refuses
    tick = _row(page, console, "tick")
    tick.wait_for()
    assert tick.locator("[data-origin=code]").count() == 1
    assert tick.locator("a:has-text('edit')").count() == 0
    assert page.goto(console.url + "/recurring/tick/edit").status == 404

    # edit from its edit page
    _row(page, console, name).locator("a:has-text('edit')").click()
    edit = page.locator("form.schedule-edit")
    edit.locator("input[name=when]").fill("1h")
    edit.locator("input[name=payload]").fill(f'{{"width": {width}, "v": 2}}')
    edit.locator("button").click()
    page.wait_for_selector(f"text=Schedule {name} changed")
    assert "every 1 hour" in _row(page, console, name).inner_text()

    # pause from its row
    _row(page, console, name).locator("button:has-text('pause')").click()
    _confirm(page)
    page.wait_for_selector(f"text=Schedule {name} paused")
    assert _row(page, console, name).locator(".badge.warn:has-text('paused')").count() == 1

    # backfill the last 2 hours from its edit page: the hourly slots that never ran, once each
    _row(page, console, name).locator("a:has-text('edit')").click()
    page.locator("input[name=hours]").fill("2")
    page.locator("button:has-text('backfill')").click()
    _confirm(page)
    flash = page.locator(f"text=/Schedule {re.escape(name)}: [0-9]+ missed slot/").inner_text()
    assert int(re.search(r": (\d+) missed", flash).group(1)) in (1, 2)  # type: ignore[union-attr]

    # the timeline and its busiest minutes stay on screen at this width
    timeline = page.locator("[data-timeline]")
    assert timeline.is_visible() and page.locator("[data-busiest-minutes]").is_visible()
    box = page.locator("[data-busiest-minutes]").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box  # wraps, never overflows

    # delete from its edit page
    _row(page, console, name).locator("a:has-text('edit')").click()
    page.locator("button.danger").click()
    _confirm(page)
    page.wait_for_selector(f"text=Schedule {name} deleted")
    assert _row(page, console, name).count() == 0

    actions = [r[0] for r in conn.execute("SELECT action FROM audit_log WHERE detail->>'schedule' = %s "
                                          "ORDER BY id", (name,))]
    assert actions == ["create schedule", "edit schedule", "pause schedule", "backfill schedule",
                       "delete schedule"], actions
