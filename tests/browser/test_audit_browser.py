"""The Audit page after an operator acted on a job a real worker killed, in a real browser: the job's id is a
link to its page, the detail reads as words (no Python or JSON reprs), and the time says its zone."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.browser.conftest import log_in
from tests.console.test_dead_groups_from_a_worker import _worker_made_dead_jobs
from tests.support.helpers import scalar


@pytest.mark.parametrize("width", [1440, 390])
def test_the_audit_trail_links_its_jobs_and_reads_as_words(page: Any, console: Any, conn: Any, spawn_worker: Any,
                                                          width: int) -> None:
    ids = _worker_made_dead_jobs(conn, spawn_worker)
    job = ids["key"][0]
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, console)
    page.goto(f"{console.url}/jobs/{job}")
    page.click("form[action$='/retry'] button")
    if page.locator("h1#confirm-title").count():  # a confirmation first, where the console asks for one
        page.click("form button[type=submit].primary, form button[type=submit].danger")
    page.wait_for_selector(".flash")
    assert scalar(conn, "SELECT count(*) FROM audit_log WHERE action = 'retry'") == 1

    page.goto(f"{console.url}/audit/")
    row = page.locator("main table tbody tr").first  # the newest action; its cells: when, who, action, jobs, detail
    detail = row.locator("td").nth(4)
    text = detail.inner_text()
    assert detail.locator(f"a[href='/jobs/{job}']").count() == 1, text
    assert not re.search(r"[\[\]{}'\"]", text), text  # words, not a repr of a list or a map
    when = row.locator("td").first.inner_text()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", when.strip()), when
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    detail.locator(f"a[href='/jobs/{job}']").click()
    page.wait_for_url(f"**/jobs/{job}")
