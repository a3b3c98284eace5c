""""Why isn't this job running?" on the job and queue pages, each reason made real.

Jobs come from the public enqueue API, pauses from the console's own form, workers are real
`python -m skiplock` processes (one SIGKILLed while it holds a lease), and the reasons are read
off the rendered pages, then shown to go away when their cause does.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import unescape
from typing import Any

from skiplock import enqueue
from tests.support.helpers import scalar, wait_for


def reasons(admin: Any, url: str) -> dict[str, str]:
    """code -> text of every reason the page shows."""
    html = admin.get(url).get_data(as_text=True)
    return {code: unescape(re.sub(r"<[^>]+>", "", text))
            for code, text in re.findall(r'<li class="reason" data-reason="([a-z_]+)">(.*?)</li>', html, re.S)}


def live_worker_count(conn: Any, queue: str) -> int:
    return scalar(conn, "SELECT count(*) FROM workers WHERE %s = ANY(queues) "
                        "AND last_seen > now() - interval '30 seconds'", (queue,))


def test_paused_queue_names_who_and_when(admin: Any) -> None:
    job = enqueue("why_paused", {"n": 1})
    assert admin.post("/queues/why_paused/pause", {"confirm": "yes"}).status_code == 303
    for url in (f"/jobs/{job}", "/queues/why_paused"):
        found = reasons(admin, url)
        assert "paused" in found, found
        assert "ops-admin paused it" in found["paused"] and "ago" in found["paused"]
    admin.post("/queues/why_paused/resume", {"confirm": "yes"})
    assert "paused" not in reasons(admin, f"/jobs/{job}")


def test_no_live_worker_serves_the_queue(admin: Any, conn: Any, spawn_worker: Any) -> None:
    job = enqueue("t1", {"n": 1})
    found = reasons(admin, f"/jobs/{job}")
    assert "no_worker" in found and "No worker is live at all" in found["no_worker"], found
    # a real worker that serves another queue only: still nobody for t1, and the page says why
    spawn_worker(SKIPLOCK_QUEUES="t2")
    wait_for(lambda: live_worker_count(conn, "t2") == 1, timeout=60, message="the t2 worker's row")
    found = reasons(admin, f"/jobs/{job}")
    assert "serve other queues: none has a handler for t1" in found["no_worker"], found
    assert "no_worker" in reasons(admin, "/queues/t1")
    # once a worker serves t1 the job simply runs
    spawn_worker(SKIPLOCK_QUEUES="t1")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (job,)) == 0, timeout=60,
             message="the t1 worker to run the job")


def test_run_at_in_the_future_and_run_now_from_the_queue_page(admin: Any) -> None:
    later = datetime.now(UTC) + timedelta(hours=2)
    job = enqueue("why_later", {"n": 1}, run_at=later)
    found = reasons(admin, f"/jobs/{job}")
    assert "scheduled" in found and "enqueued with a later run_at" in found["scheduled"], found
    # the per-row "run now" on the queue page's scheduled tab
    page = admin.get("/queues/why_later?status=scheduled").get_data(as_text=True)
    assert f'value="{job}" formaction="' in page and "run now" in page
    response = admin.post("/queues/why_later/jobs?action=run-now",
                          data={"status": "scheduled", "one": str(job), "confirm": "yes"})
    assert response.status_code == 303
    assert "scheduled" not in reasons(admin, f"/jobs/{job}")


def test_waits_behind_higher_priority_jobs_while_the_worker_is_busy(admin: Any, conn: Any,
                                                                     spawn_worker: Any) -> None:
    blocker = enqueue("t1", {"sleep": 120})
    # one handler slot and no prefetch: the worker holds the blocker and claims nothing else
    spawn_worker(SKIPLOCK_QUEUES="t1", SKIPLOCK_CONCURRENCY="1", SKIPLOCK_PREFETCH="0", SKIPLOCK_BATCH_SIZE="1")
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (blocker,)) == "running",
             timeout=60, message="the blocker to start")
    ahead = [enqueue("t1", {"n": i}, priority=5) for i in range(3)]
    job = enqueue("t1", {"n": "mine"}, priority=0)
    assert all(scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (i,)) == "queued" for i in ahead)
    wait_for(lambda: "busy" in reasons(admin, f"/jobs/{job}"), timeout=60,
             message="the worker row to report its busy slot")
    found = reasons(admin, f"/jobs/{job}")
    assert "3 ready job(s) of higher priority than its 0" in found["behind"], found
    assert "(1 of 1 running)" in found["busy"]
    assert "no_worker" not in found and "busy" in reasons(admin, "/queues/t1")


def test_lease_of_a_killed_worker_and_when_the_reaper_takes_it_back(admin: Any, conn: Any,
                                                                    spawn_worker: Any) -> None:
    job = enqueue("t3", {"sleep": 120}, max_attempts=5)
    holder = spawn_worker(SKIPLOCK_QUEUES="t3", SKIPLOCK_LEASE_SECONDS="1")
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job,)) == "running",
             timeout=60, message="the job to start")
    assert reasons(admin, f"/jobs/{job}") == {}  # heartbeating: nothing to say
    holder.kill()
    wait_for(lambda: scalar(conn, "SELECT lease_until < now() FROM jobs WHERE id = %s", (job,)), timeout=60,
             message="the dead worker's lease to run out")
    found = reasons(admin, f"/jobs/{job}")
    assert "lease_expired" in found, found
    assert "stopped heartbeating" in found["lease_expired"]
    assert "No worker is live to run the reaper" in found["lease_expired"]
    assert "lease_expired" in reasons(admin, "/queues/t3")
    # a new worker's reaper takes it back, as the page said, and runs it again
    spawn_worker(SKIPLOCK_QUEUES="t3", SKIPLOCK_LEASE_SECONDS="30")
    wait_for(lambda: scalar(conn, "SELECT attempts FROM jobs WHERE id = %s", (job,)) == 2, timeout=60,
             message="the reaper to take the job back and a worker to claim it again")


def test_unserved_queue_is_flagged_on_the_overview_and_fails_health(admin: Any, conn: Any,
                                                                     spawn_worker: Any) -> None:
    for i in range(3):
        enqueue("t2", {"n": i})
    overview = admin.get("/").get_data(as_text=True)
    row = re.search(r'<tr[^>]*data-queue="t2".*?</tr>', overview, re.S)
    assert row and "no worker" in row.group(0), overview
    health = admin.get("/health").get_data(as_text=True)
    assert re.search(r'data-check="served queues"[^>]*data-status="fail"', health), health
    assert "t2 (3 ready)" in health
    spawn_worker(SKIPLOCK_QUEUES="t2")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 't2'") == 0, timeout=60,
             message="the worker to drain t2")
    health = admin.get("/health").get_data(as_text=True)
    assert re.search(r'data-check="served queues"[^>]*data-status="ok"', health), health


def test_lock_key_taken_and_concurrency_limit_reached(admin: Any, conn: Any, spawn_worker: Any) -> None:
    from skiplock.core.features.limits import set_limit
    from tests.support.flow_handlers import FLOW_RUNS

    conn.execute(FLOW_RUNS)
    holder = enqueue("flow_keyed", {"sleep": 120}, lock_key="account:42")
    waiting = enqueue("flow_keyed", {"n": 2}, lock_key="account:42")
    set_limit(conn, "flow_limited", concurrency=1, rate=None, actor="ops")
    busy = enqueue("flow_limited", {"sleep": 120})
    capped = enqueue("flow_limited", {"n": 2})
    spawn_worker(SKIPLOCK_TASKS="tests.support.flow_handlers", SKIPLOCK_QUEUES="flow_keyed,flow_limited")
    running = "SELECT count(*) FROM jobs WHERE id = ANY(%s) AND status = 'running'"
    wait_for(lambda: scalar(conn, running, ([holder, busy],)) == 2, timeout=60, message="both first jobs to start")
    found = reasons(admin, f"/jobs/{waiting}")
    assert f"job {holder} with the same key is running" in found["lock_key"], found
    found = reasons(admin, f"/jobs/{capped}")
    assert "1 of 1 running across all workers" in found["concurrency_limit"], found
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = ANY(%s) AND status = 'queued'", ([waiting, capped],)) == 2


def test_a_payload_newer_than_every_live_worker(admin: Any, conn: Any, spawn_worker: Any) -> None:
    from tests.support.flow_handlers import FLOW_RUNS

    conn.execute(FLOW_RUNS)
    spawn_worker(SKIPLOCK_TASKS="tests.support.flow_v2", SKIPLOCK_QUEUES="flow_versions")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM workers WHERE task_versions ? 'flow_versions'") == 1,
             timeout=60, message="the v2 worker's row")
    job = enqueue("flow_versions", {"first": "Ada", "last": "Lovelace", "extra": 3}, version=3)
    found = reasons(admin, f"/jobs/{job}")
    assert "version 3, and the live workers of its queue know at most version 2" in found["version"], found
    assert scalar(conn, "SELECT attempts FROM jobs WHERE id = %s", (job,)) == 0  # left alone, no attempt used


def test_a_silent_lease_holder_before_its_lease_runs_out(admin: Any, conn: Any, spawn_worker: Any) -> None:
    job = enqueue("t4", {"sleep": 600})
    holder = spawn_worker(SKIPLOCK_QUEUES="t4", SKIPLOCK_LEASE_SECONDS="300")
    wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job,)) == "running",
             timeout=60, message="the job to start")
    holder.kill()
    # its worker row stops being live after 30 s without a heartbeat; its lease has minutes left
    wait_for(lambda: scalar(conn, "SELECT last_seen < now() - interval '30 seconds' FROM workers "
                                  "WHERE id = (SELECT worker_id FROM jobs WHERE id = %s)", (job,)),
             timeout=90, message="the killed worker's row to go stale")
    found = reasons(admin, f"/jobs/{job}")
    assert "holder_silent" in found, found
    assert "last heartbeated" in found["holder_silent"] and "its lease ends at" in found["holder_silent"]
    assert "No worker is live to run the reaper" in found["holder_silent"]
