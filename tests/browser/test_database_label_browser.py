"""The console over two databases under gunicorn (SKIPLOCK_DATABASES, the Procfile's factory), in Chromium:
at 1440 and 390 px each database's pages say which database they show, in the tab's title and in a label
that stays inside the viewport."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from skiplock import enqueue
from tests.browser.conftest import PASSWORD, USER, Console, _free_port, _healthy, save_screenshot
from tests.conftest import REPO
from tests.support.factory import make_job
from tests.support.helpers import wait_for


@pytest.fixture
def two_consoles(db_url: str, fresh_db_url: str, tmp_path: Path) -> Iterator[Console]:
    for url in (db_url, fresh_db_url):
        with psycopg.connect(url, autocommit=True) as conn:
            enqueue("t1", {"n": 1}, conn=conn)
            make_job(conn, "t1", "dead", last_error="RuntimeError: boom", attempts=5)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_") and k != "DATABASE_URL"}
    env.update({"SKIPLOCK_DATABASES": f"orders={db_url},billing={fresh_db_url}", "SKIPLOCK_WEB_USER": USER,
                "SKIPLOCK_WEB_PASSWORD": PASSWORD, "SKIPLOCK_SECRET_KEY": "browser-test-secret",
                "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"})
    log_path = tmp_path / "gunicorn.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "skiplock.webapp:create_app()", "--worker-class",
                                 "gthread", "--workers", "1", "--threads", "4", "--bind", f"127.0.0.1:{port}"],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    console = Console(f"http://127.0.0.1:{port}", log_path)
    try:
        wait_for(lambda: proc.poll() is not None or _healthy(console.url), timeout=30, message="gunicorn up")
        assert proc.poll() is None, console.log()
        yield console
    finally:
        proc.terminate()
        proc.wait(timeout=15)


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
