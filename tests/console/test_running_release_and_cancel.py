"""The Long-runners page says what Release does not do, and offers Cancel for each running job.

A real worker runs a handler that loops until it is asked to stop; Cancel from the running page
ends it failed "cancelled by console:<user>"; Release leaves a note that the handler was not stopped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from skiplock import enqueue
from tests.conftest import REPO
from tests.integration.test_cancel import CANCEL_TASKS
from tests.support.helpers import scalar, wait_for


def test_running_page_says_release_leaves_the_handler_and_cancel_stops_it(admin: Any, conn: Any, spawn_worker: Any,
                                                                         tmp_path: Path) -> None:
    (tmp_path / "cancel_tasks.py").write_text(CANCEL_TASKS)
    spawn_worker(SKIPLOCK_TASKS="cancel_tasks", PYTHONPATH=f"{tmp_path}:{REPO}", SKIPLOCK_HEARTBEAT_INTERVAL="0.2")
    cancelled, released = enqueue("long", {"n": 1}), enqueue("long", {"n": 2})
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects") == 2, timeout=60,
             message="both handlers running")
    page = admin.get("/running/").get_data(as_text=True)
    assert "Release does not stop the handler" in page
    assert re.search(rf'formaction="/jobs/{cancelled}/cancel-running"', page)

    admin.post(f"/jobs/{cancelled}/cancel-running", {"confirm": "yes"})
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (cancelled,)) == "failed",
             timeout=60, message="the cancelled handler to stop")
    assert scalar(conn, "SELECT last_error FROM jobs WHERE id = %s", (cancelled,)).startswith("cancelled by console:")

    done = admin.post("/running/release", data={"one": str(released), "confirm": "yes"}, follow_redirects=True)
    assert "Their handlers were not stopped" in done.get_data(as_text=True)
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (released,)) in ("queued", "running")
