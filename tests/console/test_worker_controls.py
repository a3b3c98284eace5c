"""Worker controls (issue 36): quiet a real worker process from the console (it finishes what it runs
and claims no more), then stop it (it exits 0); both confirmed first and audited."""

from __future__ import annotations

import re
from typing import Any

from skiplock import enqueue
from tests.support.helpers import scalar, wait_for


def test_quiet_then_stop_a_worker_from_the_console(admin: Any, conn: Any, spawn_worker: Any) -> None:
    first = enqueue("t1", {"sleep_after": 3})
    worker = spawn_worker(SKIPLOCK_QUEUES="t1")
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (first,)) == "running",
             timeout=60, message="the first job to run")
    # a worker may claim its first job before its row is written (it registers at its first heartbeat)
    wid = wait_for(lambda: scalar(conn, "SELECT id FROM workers"), timeout=30, message="the worker's row")
    html = admin.get("/workers/").get_data(as_text=True)
    assert f'href="/running/?worker={wid}"' in html.replace("%3A", ":")

    ask = admin.post(f"/workers/{wid}/quiet").get_data(as_text=True)
    assert 'data-confirm="quiet"' in ask and "claims no more jobs" in ask
    assert scalar(conn, "SELECT command FROM workers") is None  # nothing until confirmed
    assert admin.post(f"/workers/{wid}/quiet", {"confirm": "yes"}).status_code == 303
    wait_for(lambda: "quieted by console:ops-admin" in worker.log(), timeout=30, message="the worker to quiet")
    second = enqueue("t1", {"n": 2})
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (first,)) == 0, timeout=30,
             message="the running job to finish")
    # two more heartbeats: the worker is alive and still claims nothing
    seen = scalar(conn, "SELECT last_seen FROM workers")
    wait_for(lambda: scalar(conn, "SELECT last_seen FROM workers") > seen, timeout=30, message="a heartbeat")
    seen = scalar(conn, "SELECT last_seen FROM workers")
    wait_for(lambda: scalar(conn, "SELECT last_seen FROM workers") > seen, timeout=30, message="another heartbeat")
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (second,)) == "queued"
    assert re.search(r'data-command="quiet"', admin.get("/workers/").get_data(as_text=True))

    assert admin.post(f"/workers/{wid}/stop", {"confirm": "yes"}).status_code == 303
    assert worker.proc.wait(timeout=60) == 0
    assert "stopped by console:ops-admin" in worker.log()
    actions = [r[0] for r in conn.execute("SELECT action FROM audit_log ORDER BY id").fetchall()]
    assert actions == ["quiet worker", "stop worker"]
