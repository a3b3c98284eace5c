"""The console mounted in Django and in FastAPI, used in Chromium: log in through the HOST app's own
login page, open the console, retry a dead job made by a real worker, and find the host's user
name in the audit trail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from tests.browser.conftest import _free_port
from tests.conftest import REPO
from tests.integration.test_examples import as_url
from tests.support.django_host import django_shop, make_dead_job_in, up_at
from tests.support.helpers import scalar, wait_for

FASTAPI_APP = REPO / "examples" / "fastapi_async"


def retry_in_the_console(page: Any, base: str, prefix: str, job_id: int) -> None:
    """On the dead-letter page (already logged in): htmx loaded under the prefix, then retry the job."""
    assert page.url == f"{base}{prefix}/dead/", page.url
    wait_for(lambda: page.evaluate("typeof window.htmx") == "object", timeout=10, message="htmx loaded")
    row = page.locator(f"tr[data-job-id='{job_id}']")
    row.wait_for()
    row.locator("button:has-text('retry')").click()
    page.click("button:has-text('Yes, retry 1 job')")  # the row's retry asks first
    page.wait_for_selector("text=Retried 1 job(s).")
    assert page.url.startswith(f"{base}{prefix}/")


def audited(db_url: str, job_id: int) -> tuple[str, list[tuple[str, str, str]]]:
    with psycopg.connect(db_url, autocommit=True) as conn:
        status = scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,))
        return status, conn.execute("SELECT actor, role, action FROM audit_log").fetchall()


def test_django_staff_logs_in_through_django_and_retries(page: Any, fresh_db_url: str, spawn_worker: Any,
                                                         tmp_path: Path) -> None:
    job_id = make_dead_job_in(fresh_db_url, spawn_worker)
    with django_shop(fresh_db_url, tmp_path / "gunicorn.log") as base:
        page.goto(f"{base}/jobs/dead/")  # not logged in: Django sends the browser to its login page
        assert page.url == f"{base}/accounts/login/?next=/jobs/dead/"
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", "alice-pw")
        page.click("button[type=submit]")
        page.wait_for_selector("h1")
        retry_in_the_console(page, base, "/jobs", job_id)
    assert audited(fresh_db_url, job_id) == ("queued", [("alice", "admin", "retry selected")])


def test_fastapi_user_logs_in_through_the_app_and_retries(page: Any, fresh_db_url: str, spawn_worker: Any,
                                                          tmp_path: Path) -> None:
    job_id = make_dead_job_in(fresh_db_url, spawn_worker)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_")}
    env.update({"DATABASE_URL": as_url(fresh_db_url), "PYTHONPATH": f"{FASTAPI_APP}:{REPO}"})
    with open(tmp_path / "uvicorn.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "app:app", "--host", "127.0.0.1", "--port",
                                 str(port)], cwd=FASTAPI_APP, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: proc.poll() is not None or up_at(base + "/login"), timeout=30, message="uvicorn up")
        assert proc.poll() is None, (tmp_path / "uvicorn.log").read_text()
        page.goto(f"{base}/admin/jobs/dead/")  # the app's auth dependency sends the browser to its login
        assert page.url == f"{base}/login?next=/admin/jobs/dead/"
        page.fill("input[name=user]", "alice")
        page.fill("input[name=password]", "alice-pw")
        page.click("button[type=submit]")
        page.wait_for_selector("h1")
        retry_in_the_console(page, base, "/admin/jobs", job_id)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert audited(fresh_db_url, job_id) == ("queued", [("alice", "admin", "retry selected")])
