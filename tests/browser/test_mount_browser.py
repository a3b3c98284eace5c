"""The console mounted in a host app under gunicorn, used in Chromium: the host's login, then a retry.

The dead job is made by a real worker; the retried job is then run by a real worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.browser.conftest import _free_port, _healthy
from tests.conftest import REPO
from tests.console.test_mount import make_dead_job
from tests.support.helpers import scalar, wait_for
from tests.support.host_app import PREFIX


def test_admin_of_the_host_retries_a_dead_job_in_the_browser(page: Any, db_url: str, conn: Any, spawn_worker: Any,
                                                            tmp_path: Path) -> None:
    job_id = make_dead_job(db_url, spawn_worker)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_")}
    env.update({"DATABASE_URL": db_url, "PYTHONPATH": str(REPO)})
    with open(tmp_path / "gunicorn.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "tests.support.host_app:from_env()",
                                 "--worker-class", "gthread", "--threads", "4", "--bind", f"127.0.0.1:{port}"],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: proc.poll() is not None or _healthy(url + PREFIX), timeout=30, message="gunicorn up")
        assert proc.poll() is None, (tmp_path / "gunicorn.log").read_text()
        response = page.goto(f"{url}{PREFIX}/dead/")
        assert response.status == 403  # not logged in to the host
        page.goto(f"{url}/login?user=alice")  # the host's login redirects into the console
        page.wait_for_selector("h1")
        assert page.url == f"{url}{PREFIX}/"
        # htmx loaded from under the prefix (the CSP allows only our own scripts)
        wait_for(lambda: page.evaluate("typeof window.htmx") == "object", timeout=10, message="htmx loaded")
        page.click("nav >> text=Dead letters")
        row = page.locator(f"tr[data-job-id='{job_id}']")
        row.wait_for()
        row.locator("button:has-text('retry')").click()
        page.click("button:has-text('Yes, retry 1 job')")  # the row's retry asks first
        page.wait_for_selector("text=Retried 1 job(s).")
        assert page.url.startswith(f"{url}{PREFIX}/")
        assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)) == "queued"
    finally:
        proc.terminate()
        proc.wait(timeout=15)
