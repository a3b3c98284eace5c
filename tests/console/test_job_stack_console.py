"""The job page's "Show stack" for a read-only login, on a job a real worker runs: it may ask (the request
is audited with its role), it may not change the job; the panel shows the stack once taken, and a job that
does not run is refused with why."""

from __future__ import annotations

from typing import Any

import pytest

from skiplock import enqueue
from tests.conftest import REPO
from tests.support.helpers import scalar, wait_for

ENV = {"SKIPLOCK_TASKS": "tests.support.logging_handlers", "PYTHONPATH": str(REPO),
       "SKIPLOCK_HEARTBEAT_INTERVAL": "20", "SKIPLOCK_POLL_INTERVAL": "0.1", "SKIPLOCK_QUEUES": "stack_sync"}


@pytest.mark.slow
def test_a_read_only_login_may_ask_for_a_running_jobs_stack(viewer: Any, conn: Any, spawn_worker: Any) -> None:
    job = enqueue("stack_sync", {"seconds": 120})
    spawn_worker(**ENV)
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (job,)) == 1,
             timeout=60, message="the handler to start")
    page = viewer.get(f"/jobs/{job}").get_data(as_text=True)
    assert 'class="show-stack"' in page and "disabled" not in page.split('class="show-stack"')[1][:40]

    asked = viewer.post(f"/jobs/{job}/stack")
    assert asked.status_code == 303 and asked.headers["Location"].endswith(f"/jobs/{job}#stack")
    assert conn.execute("SELECT role, count FROM audit_log WHERE action = 'show stack'").fetchall() == [("readonly", 1)]
    wait_for(lambda: "pre class=\"stack\"" in viewer.get(f"/jobs/{job}/stack").get_data(as_text=True), timeout=15,
             message="the panel to show the stack")
    assert "in wait_for_the_gateway" in viewer.get(f"/jobs/{job}/stack").get_data(as_text=True)
    assert viewer.post(f"/jobs/{job}/cancel-running").status_code == 403  # still read-only for the job itself


def test_a_job_that_does_not_run_is_refused(admin: Any, conn: Any) -> None:
    queued = enqueue("stack_sync", {}, delay=3600)
    refused = admin.post(f"/jobs/{queued}/stack", headers={"HX-Request": "true"})
    assert refused.status_code == 200
    assert f"job {queued} is queued, not running: it has no stack to show" in refused.get_data(as_text=True)
    assert scalar(conn, "SELECT count(*) FROM job_stacks") == 0
    assert scalar(conn, "SELECT count(*) FROM audit_log WHERE action = 'show stack'") == 0
