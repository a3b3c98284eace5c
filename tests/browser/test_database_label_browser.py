"""The console over two databases under gunicorn (SKIPLOCK_DATABASES, the Procfile's factory), in Chromium:
at 1440 and 390 px each database's pages say which database they show, in the tab's title and in a label
that stays inside the viewport."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from skiplock import enqueue
from tests.browser.conftest import PASSWORD, USER, Console, save_screenshot, serve_console
from tests.support.factory import make_job


@pytest.fixture
def two_consoles(db_url: str, fresh_db_url: str, tmp_path: Path) -> Iterator[Console]:
    for url in (db_url, fresh_db_url):
        with psycopg.connect(url, autocommit=True) as conn:
            enqueue("t1", {"n": 1}, conn=conn)
            make_job(conn, "t1", "dead", last_error="RuntimeError: boom", attempts=5)
    with serve_console({"SKIPLOCK_DATABASES": f"orders={db_url},billing={fresh_db_url}"}, tmp_path) as console:
        yield console


@pytest.mark.parametrize("width", [1440, 390])
def test_each_page_names_its_database_at_both_widths(page: Any, two_consoles: Console, width: int,
                                                      tmp_path: Path) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(two_consoles.url + "/")
    page.fill("input[name=user]", USER)
    page.fill("input[name=password]", PASSWORD)
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_selector(".database-label")
    for path, name in (("/", "orders"), ("/dead/", "orders"), ("/db/billing/", "billing"),
                       ("/db/billing/dead/", "billing"), ("/db/billing/queues/t1", "billing")):
        page.goto(two_consoles.url + path)
        label = page.locator(".database-label")
        assert label.inner_text().split() == ["Database", name], (path, label.inner_text())
        assert f" · {name} · " in page.title(), (path, page.title())
        box = label.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (path, box)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, path
    save_screenshot(page, f"database-label-{width}.png", tmp_path)
