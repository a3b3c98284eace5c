"""What the on-call operator reads in the console, in Chromium against gunicorn, on data real worker
processes made; each of these was wrong once:

- a worker quieted from the Workers page claims nothing though enqueues NOTIFY it: the page says quiet and
  the jobs stay queued on the queue page;
- the workflow page's "Retry the dead ones…" confirmation names how many dependents wait again, not 1;
- runs lost with a SIGKILLed worker are failures on the overview ("failed today", the chart) and the queue's
  failure rate, and the dead worker's "in flight" is what the jobs table says it holds (none once reaped);
- "What changed?" counts every new error group, and the overview's "scheduled for later" leaves out the
  jobs "waiting to retry" shown beside it.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

import skiplock
from skiplock import enqueue, enqueue_many
from skiplock.services.reaper import Reaper
from tests.browser.conftest import log_in
from tests.support.helpers import scalar, wait_for

HELD = 6  # running jobs the killed worker holds
QUIET_JOBS = 5
BEHAVE_QUEUES = ("t1", "t2", "t3", "t4", "default", "slow", "fast")  # tests.support.handlers: more than five


def _number(page: Any, name: str) -> str:
    """An overview summary number, as shown."""
    return str(page.locator(f"[data-sum='{name}']").first.inner_text()).strip()


def _last_seen(conn: Any, wid: str) -> Any:
    return scalar(conn, "SELECT last_seen FROM workers WHERE id = %s", (wid,))


def _wait_for_a_heartbeat(conn: Any, wid: str, message: str) -> None:
    seen = _last_seen(conn, wid)
    wait_for(lambda: _last_seen(conn, wid) > seen, timeout=30, message=message)


@pytest.mark.slow
@pytest.mark.browser
def test_a_worker_quieted_from_the_workers_page_claims_nothing_on_a_notify(page: Any, console: Any, conn: Any,
                                                                          spawn_worker: Any) -> None:
    worker = spawn_worker(SKIPLOCK_QUEUES="t1")
    wid = wait_for(lambda: scalar(conn, "SELECT id FROM workers"), timeout=90, message="the worker's row")
    # idle, it registers as a waiter: each insert into t1 then makes the producer NOTIFY it
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters WHERE worker_id = %s", (wid,)) > 0,
             timeout=30, message="the idle worker to register as a waiter")
    log_in(page, console)
    page.goto(console.url + "/workers/")
    row = page.locator(f"tr[data-worker-id='{wid}']")
    row.locator("button", has_text="quiet").click()
    page.wait_for_selector("section.confirm")
    page.locator("section.confirm button[type=submit]").click()
    page.wait_for_selector(f"tr[data-worker-id='{wid}'] [data-command='quiet']")
    wait_for(lambda: "quieted by console:" in worker.log(), timeout=30, message="the worker to read the quiet")

    # lock-keyed jobs: the insert trigger hands none to the waiting worker, it NOTIFYs it, and the worker's
    # listener would claim for its idle lane
    ids = [enqueue("t1", {"n": n}, lock_key=f"quiet-{n}") for n in range(QUIET_JOBS)]
    # two more row heartbeats: the worker is alive and has had the NOTIFYs
    for beat in ("a heartbeat", "another heartbeat"):
        _wait_for_a_heartbeat(conn, wid, beat)

    page.goto(console.url + "/workers/")
    row = page.locator(f"tr[data-worker-id='{wid}']")
    row.wait_for()
    heartbeat = str(row.locator("td[data-label='last heartbeat']").inner_text())
    in_flight = row.locator("td[data-label='in flight']").inner_text().strip()

    # the queue page lists what is ready now (none of them was claimed) and what runs (nothing)
    page.goto(console.url + "/queues/t1?status=ready")
    page.wait_for_selector("nav.tabs a[data-tab='ready']")
    listed = page.locator("tr[data-job-id]")
    read = {"ready": sorted(int(str(listed.nth(i).get_attribute("data-job-id"))) for i in range(listed.count())),
            "their status": {str(t).strip() for t in listed.locator("td[data-label='status']").all_inner_texts()},
            "worker live": "live" in heartbeat, "worker quiet": "quiet" in heartbeat, "worker in flight": in_flight}
    assert read == {"ready": sorted(ids), "their status": {"queued"}, "worker live": True, "worker quiet": True,
                    "worker in flight": "0"}
    assert conn.execute("SELECT status::text, count(*), max(attempts) FROM jobs WHERE id = ANY(%s) GROUP BY 1",
                        (ids,)).fetchall() == [("queued", QUIET_JOBS, 0)]


@pytest.mark.slow
@pytest.mark.browser
def test_retry_the_dead_ones_confirmation_names_the_dependents_that_wait_again(page: Any, console: Any, conn: Any,
                                                                               spawn_worker: Any) -> None:
    root = skiplock.enqueue("wfc_step", {"n": 0})
    # one attempt, then dead (said at enqueue too: a @task's options reach jobs enqueued before a worker ran
    # only since migration 049)
    bad = skiplock.enqueue("wfc_fail", {"n": 1}, depends_on=[root], max_attempts=1)
    for n in range(3):
        skiplock.enqueue("wfc_step", {"n": 10 + n}, depends_on=[bad])  # end because `bad` failed
    worker = spawn_worker(SKIPLOCK_TASKS="tests.support.console_workflow_handlers",
                          SKIPLOCK_QUEUES="wfc_step,wfc_fail")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status IN ('dead', 'failed')") == 4,
             timeout=90, message="the failed job and its three dependents to end")
    worker.terminate()

    log_in(page, console)
    page.goto(f"{console.url}/workflows/{root}")
    page.locator("button", has_text="Retry the dead ones").click()
    page.wait_for_selector("section.confirm")
    text = " ".join(str(page.locator("section.confirm").inner_text()).split())
    waiting_again = re.search(r"The (\d+) job\(s\) that ended only because a dependency failed wait for them", text)
    read = {"dead on their own": page.locator("section.confirm .confirm-count").get_attribute("data-count"),
            "dependents that wait again": waiting_again.group(1) if waiting_again else text}
    assert read == {"dead on their own": "1", "dependents that wait again": "3"}
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status IN ('dead', 'failed')") == 4  # asked, not done


@pytest.mark.slow
@pytest.mark.browser
def test_runs_lost_with_a_killed_worker_are_failures_and_it_holds_nothing(page: Any, console: Any, conn: Any,
                                                                        spawn_worker: Any, db_url: str) -> None:
    for n in range(HELD):
        enqueue("slow", {"sleep": 120, "n": n})
    worker = spawn_worker(SKIPLOCK_LEASE_SECONDS="600", SKIPLOCK_QUEUES="slow")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == HELD
             and scalar(conn, "SELECT max(in_flight) FROM workers") == HELD, timeout=90,
             message=f"the worker to hold {HELD} running jobs and report them")
    wid = scalar(conn, "SELECT id FROM workers")
    worker.kill()  # SIGKILL, as the kernel's OOM killer does
    # its heartbeat and its leases are old now: the reaper's own pass takes the runs back
    conn.execute("UPDATE workers SET last_seen = last_seen - interval '45 seconds'")
    conn.execute("UPDATE jobs SET lease_until = now() - interval '1 second' WHERE status = 'running'")
    with ConnectionPool(db_url, min_size=1, max_size=1, open=True) as pool:
        assert len(Reaper(pool).run_once()) == HELD
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == 0

    # every number the operator reads, read first and compared at once: a failure shows each wrong one
    read: dict[str, Any] = {}
    log_in(page, console)  # lands on the overview
    page.wait_for_selector("[data-sum='failed']")
    read["failed today"], read["processed today"] = _number(page, "failed"), _number(page, "processed")
    read["the chart draws reaped runs"] = page.locator("rect.reaped").count() >= 1

    page.goto(console.url + "/queues/slow")
    page.wait_for_selector(".failure-total")
    total = " ".join(str(page.locator(".failure-total").first.inner_text()).split())
    read["queue failure rate"] = total.split(" (")[0]  # without what the runs were: retried, dead or reaped

    page.goto(console.url + "/workers/")
    row = page.locator(f"tr[data-worker-id='{wid}']")
    row.wait_for()
    read["worker stale"] = "stale" in row.locator("td[data-label='last heartbeat']").inner_text()
    in_flight = row.locator("td[data-label='in flight'] a")
    read["worker in flight"] = in_flight.inner_text().strip()
    in_flight.click()  # the jobs it runs, as the link promises
    page.wait_for_url(lambda url: "/running" in url)
    page.wait_for_selector("td.empty:has-text('Nothing is running.')")
    read["its link lists"] = page.locator("tr[data-job-id]").count()
    assert read == {"failed today": str(HELD), "processed today": str(HELD), "the chart draws reaped runs": True,
                    "queue failure rate": f"100.0% of {HELD} runs failed", "worker stale": True,
                    "worker in flight": "0", "its link lists": 0}


@pytest.mark.slow
@pytest.mark.browser
def test_what_changed_counts_every_new_group_and_scheduled_leaves_out_retries(page: Any, console: Any, conn: Any,
                                                                             spawn_worker: Any) -> None:
    # one new error group per queue (seven, more than the five the sentence names); three jobs that fail
    # their first attempt and wait a 10-minute backoff; four enqueued for an hour from now
    enqueue_many([{"queue": q, "payload": {"permanent": True}} for q in BEHAVE_QUEUES]
                 + [{"queue": "t1", "payload": {"fail_times": 1, "n": n}} for n in range(3)]
                 + [{"queue": "t2", "payload": {"n": n}, "delay": 3600} for n in range(4)])
    worker = spawn_worker(SKIPLOCK_QUEUES=",".join(BEHAVE_QUEUES), SKIPLOCK_BACKOFF_BASE="600",
                          SKIPLOCK_BACKOFF_CAP="600")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'dead'") == len(BEHAVE_QUEUES)
             and scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'queued' AND attempts = 1") == 3,
             timeout=90, message="seven dead jobs and three waiting to retry")
    worker.terminate()

    log_in(page, console)
    page.wait_for_selector("[data-sum='scheduled']")
    read: dict[str, Any] = {"waiting to retry": _number(page, "retrying"),
                            "scheduled for later": _number(page, "scheduled")}

    page.goto(console.url + "/changed/")
    changed = page.locator("#changed")
    changed.wait_for()
    text = " ".join(str(changed.inner_text()).split())
    groups = re.search(r"(\d+) error groups? new in the last hour", text)
    read["new error groups"] = groups.group(1) if groups else text
    read["groups named"] = page.locator("#changed [data-new-group]").count()
    # compared at once: a failure shows each wrong number
    assert read == {"waiting to retry": "3", "scheduled for later": "4", "new error groups": str(len(BEHAVE_QUEUES)),
                    "groups named": 5}
