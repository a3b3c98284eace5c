"""What an on-call operator sees of jobs real workers hold (issue 36, defects 2, 3, 4, 9 and 10):

- a SIGKILLed worker's jobs are marked orphaned on Long-runners, with the reaper's time; Health warns
  about the stopped worker and, once reaped, about the reaped jobs; the overview counts live workers;
- Release, Cancel and Pause first say what they will do, and change nothing until confirmed;
- a requested cancel shows as pending on the job page, which stops offering Cancel;
- lock key, tenant and payload version show on the job page and in the lists;
- a recurring schedule whose every run dies shows its dead runs and is flagged there and on Health.
"""

from __future__ import annotations

import re
from typing import Any

from psycopg_pool import ConnectionPool

from skiplock import enqueue
from skiplock.services.reaper import Reaper
from tests.support.helpers import scalar, wait_for

LONG = {"SKIPLOCK_LEASE_SECONDS": "600", "SKIPLOCK_QUEUES": "slow"}


def _running(conn: Any, n: int) -> None:
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == n, timeout=60,
             message=f"{n} running jobs")


def test_a_killed_workers_jobs_are_orphaned_and_health_says_so(admin: Any, conn: Any, spawn_worker: Any,
                                                                db_url: str) -> None:
    ids = [enqueue("slow", {"sleep": 120, "n": n}) for n in range(3)]
    worker = spawn_worker(**LONG)
    _running(conn, 3)
    assert 'data-sum="workers"' in (html := admin.get("/").get_data(as_text=True))
    assert re.search(r'data-sum="workers"><a [^>]*>1</a>', html), "the overview counts one live worker"
    worker.kill()  # SIGKILL: no release, no goodbye
    # time passes: the worker's last heartbeat is now older than a live worker's
    conn.execute("UPDATE workers SET last_seen = last_seen - interval '45 seconds'")

    page = admin.get("/running/").get_data(as_text=True)
    for job in ids:
        row = re.search(rf'<tr data-job-id="{job}" class="orphaned">(.*?)</tr>', page, re.S)
        assert row, f"job {job} is not marked orphaned"
        assert "data-orphaned" in row.group(1) and "reaper takes it back at" in row.group(1)
    html = admin.get("/").get_data(as_text=True)
    assert re.search(r'data-sum="workers"><a [^>]*>0</a>', html) and 'data-sum="workers-stale">1 stale' in html

    health = admin.get("/health").get_data(as_text=True)
    check = re.search(r'<article class="check" data-check="workers" data-status="(\w+)">(.*?)</article>', health, re.S)
    assert check and check.group(1) == "warn", health
    assert "1 worker(s) stopped heartbeating" in check.group(2) and "holding 3 running job(s)" in check.group(2)
    assert re.search(r'data-verdict="(warn|fail)"', health) and "workers" in health.split('class="verdict')[1][:400]

    # the leases end and the reaper takes the jobs back: Health counts them for the next hour
    conn.execute("UPDATE jobs SET lease_until = now() - interval '1 second' WHERE status = 'running'")
    with ConnectionPool(db_url, min_size=1, max_size=1, open=True) as pool:
        assert len(Reaper(pool).run_once()) == 3
    health = admin.get("/health").get_data(as_text=True)
    assert "the reaper took back 3 job(s) in the last hour" in health


def test_actions_on_running_jobs_and_queues_confirm_first(admin: Any, conn: Any, spawn_worker: Any) -> None:
    job = enqueue("slow", {"sleep": 120}, lock_key="account-7", tenant="acme")
    later = enqueue("slow", {"n": 2}, delay=3600, lock_key="account-9", tenant="globex", version=2)
    spawn_worker(**LONG)
    _running(conn, 1)

    # the lock key, tenant and payload version are on the job page and in the lists
    detail = admin.get(f"/jobs/{job}").get_data(as_text=True)
    assert '<dd class="lock-key">account-7</dd>' in detail and '<dd class="tenant">acme</dd>' in detail
    assert '<dd class="version">1</dd>' in detail
    running = admin.get("/running/").get_data(as_text=True)
    assert "lock account-7" in running and "tenant acme" in running
    scheduled = admin.get("/queues/slow?status=scheduled").get_data(as_text=True)
    row = re.search(rf'<tr data-job-id="{later}">(.*?)</tr>', scheduled, re.S)
    assert row and "account-9" in row.group(1) and "globex" in row.group(1)
    assert re.search(r'<td class="num" title="payload version"[^>]*>2</td>', row.group(1))  # [^>]: its data-label

    # Release: a page that says what happens; nothing changes until it is confirmed
    first = admin.post("/running/release", {"one": str(job)})
    text = first.get_data(as_text=True)
    assert first.status_code == 200 and 'data-confirm="release"' in text and "are NOT stopped" in text
    selected = admin.post("/running/release", {"ids": [str(job)]}).get_data(as_text=True)
    assert "Release 1 running job(s)?" in selected
    # Pause: says what stops and what does not; the queue page has no "new queue" checkbox
    pause = admin.post("/queues/slow/pause").get_data(as_text=True)
    assert 'data-confirm="pause"' in pause and "1 running job(s) are not stopped" in pause
    assert scalar(conn, "SELECT count(*) FROM paused_queues") == 0
    assert "pause a new queue" not in admin.get("/queues/slow").get_data(as_text=True)
    # Cancel: the same
    ask = admin.post(f"/jobs/{job}/cancel-running").get_data(as_text=True)
    assert 'data-confirm="cancel"' in ask and "ends failed" in ask
    assert conn.execute("SELECT status::text, cancel_requested_at FROM jobs WHERE id = %s",
                        (job,)).fetchone() == ("running", None)

    # confirmed: the cancel is pending until the handler ends, and the page says so
    assert admin.post(f"/jobs/{job}/cancel-running", {"confirm": "yes"}).status_code == 303
    detail = admin.get(f"/jobs/{job}").get_data(as_text=True)
    assert 'data-reason="cancel-requested"' in detail
    assert re.search(r"Cancel requested by console:ops-admin\s+at \d\d:\d\d:\d\d UTC", detail)
    assert "waiting for the\n      handler" in detail or "waiting for the handler" in detail
    assert f"/jobs/{job}/cancel-running" not in detail and "Its worker is heartbeating" not in detail
    running = admin.get("/running/").get_data(as_text=True)
    assert "data-cancel-pending" in running and f'formaction="/jobs/{job}/cancel-running"' not in running


def test_a_schedule_whose_runs_die_shows_them_and_is_flagged(admin: Any, conn: Any, spawn_worker: Any) -> None:
    spawn_worker(SKIPLOCK_TASKS="tests.support.recurring_dying", SKIPLOCK_QUEUES="rdie")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'rdie' AND status = 'dead'") >= 3,
             timeout=60, message="three dead runs of the schedule")
    html = admin.get("/recurring/").get_data(as_text=True)
    row = re.search(r'<tr data-schedule="charge-renewals"[^>]*>(.*?)</tr>', html, re.S)
    assert row and "data-last-run-died" in row.group(1)
    states = re.findall(r'data-run-state="(\w+)"', row.group(1))
    assert states.count("dead") >= 3, states
    dead_job = scalar(conn, "SELECT max(id) FROM jobs WHERE queue = 'rdie' AND status = 'dead'")
    assert f'href="/jobs/{dead_job}"' in row.group(1) or "dead" in states[:2]
    assert "payment provider rejected the API key" in row.group(1)
    health = admin.get("/health").get_data(as_text=True)
    check = re.search(r'data-check="recurring runs" data-status="(\w+)">(.*?)</article>', health, re.S)
    assert check and check.group(1) == "warn" and "charge-renewals" in check.group(2)


def test_the_queue_page_says_its_jobs_wait_on_the_concurrency_limit(admin: Any, conn: Any,
                                                                      spawn_worker: Any) -> None:
    from skiplock.core.features.limits import set_limit

    set_limit(conn, "slow", concurrency=4, rate=None, actor="test")
    for n in range(16):
        enqueue("slow", {"sleep": 120, "n": n})
    spawn_worker(SKIPLOCK_CONCURRENCY="8", **LONG)
    _running(conn, 4)
    html = admin.get("/queues/slow").get_data(as_text=True)
    why_box = html.split('<ul class="reasons">', 1)[1].split("</ul>", 1)[0] if '<ul class="reasons">' in html else ""
    assert 'data-reason="concurrency_limit"' in why_box, html
    assert "12 ready job(s) of slow wait on its concurrency limit: 4 of 4 run now" in why_box


def test_a_future_job_says_why_in_one_readable_sentence(admin: Any) -> None:
    job = enqueue("slow", {"n": 1}, delay=3600)
    html = admin.get(f"/jobs/{job}").get_data(as_text=True)
    assert "set by it was" not in html
    assert "because it was enqueued with a later run_at (delay= or run_at=)" in html
