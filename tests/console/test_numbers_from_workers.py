"""The console's numbers against what real workers did: each number here was wrong once.

- a worker killed with its jobs in hand: the reaped runs are failures on the overview ("failed
  today", the chart), the queue's failure rate and "What changed?"; the dead worker's "in flight" is
  what the jobs table says it holds (none once reaped), not its last report;
- "What changed?" counts every new error group, not the first five;
- "Retry the dead ones" counts the dependents that ended because of a failed job, not one row.
"""

from __future__ import annotations

import re
from typing import Any

from psycopg_pool import ConnectionPool

import skiplock
from skiplock import enqueue, enqueue_many
from skiplock.services.reaper import Reaper
from skiplock.tools import testing
from tests.support import console_workflow_handlers  # noqa: F401  (registers the wfc_ handlers)
from tests.support.helpers import scalar, wait_for

HELD = 6  # jobs the killed worker holds: more than "What changed?"'s minimum of failures in an hour
HX = {"HX-Request": "true"}


def test_runs_lost_with_a_killed_worker_count_as_failures_and_it_holds_nothing(admin: Any, conn: Any,
                                                                               spawn_worker: Any, db_url: str) -> None:
    for n in range(HELD):
        enqueue("slow", {"sleep": 120, "n": n})
    worker = spawn_worker(SKIPLOCK_LEASE_SECONDS="600", SKIPLOCK_QUEUES="slow")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == HELD
             and scalar(conn, "SELECT max(in_flight) FROM workers") == HELD, timeout=60,
             message=f"the worker to hold {HELD} running jobs and report them")
    worker.kill()  # SIGKILL, as the kernel's OOM killer does
    conn.execute("UPDATE workers SET last_seen = last_seen - interval '45 seconds'")  # its heartbeat is old now
    conn.execute("UPDATE jobs SET lease_until = now() - interval '1 second' WHERE status = 'running'")
    with ConnectionPool(db_url, min_size=1, max_size=1, open=True) as pool:
        assert len(Reaper(pool).run_once()) == HELD
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'") == 0

    overview = admin.get("/").get_data(as_text=True)
    numbers = dict(re.findall(r'data-sum="([a-z-]+)">(?:<a [^>]*>)?([\d,.+]+)', overview))
    assert numbers["failed"] == str(HELD) and numbers["processed"] == str(HELD), numbers
    assert len(re.findall(r'<rect class="reaped"', overview)) >= 1, "the chart draws the reaped runs"

    queue = admin.get("/queues/slow").get_data(as_text=True)
    assert f"100.0% of {HELD} runs failed" in queue

    changed = admin.get("/changed/", headers=HX).get_data(as_text=True)
    assert 'data-changed-queue="slow"' in changed, changed

    workers = admin.get("/workers/").get_data(as_text=True)
    cell = re.search(r'data-label="in flight"><a [^>]*>(\d+)</a>', workers)
    assert cell and cell.group(1) == "0", "the dead worker holds nothing: the reaper took its jobs back"


def test_what_changed_counts_every_new_error_group(admin: Any, conn: Any, spawn_worker: Any) -> None:
    queues = ["t1", "t2", "t3", "t4", "default", "fast"]  # one new group each: the same error in six queues
    enqueue_many([{"queue": q, "payload": {"permanent": True}} for q in queues])
    worker = spawn_worker(SKIPLOCK_QUEUES=",".join(queues))
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'dead'") == len(queues), timeout=60,
             message="six dead jobs")
    worker.terminate()
    html = admin.get("/changed/", headers=HX).get_data(as_text=True)
    assert f"{len(queues)} error groups new in the last hour" in html, html
    assert f'data-new-groups="{len(queues)}"' in html
    assert len(re.findall(r"data-new-group>", html)) == 5  # the five largest are named, with a link to all


def test_retry_the_dead_ones_counts_the_dependents_that_ended_with_them(admin: Any, conn: Any) -> None:
    root = skiplock.enqueue("wfc_step", {"n": 0})
    bad = skiplock.enqueue("wfc_fail", {"n": 1}, depends_on=[root])
    for n in range(3):
        skiplock.enqueue("wfc_step", {"n": 10 + n}, depends_on=[bad])
    testing.drain(["wfc_step", "wfc_fail"])  # the worker's own claim and ack, in this process
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status IN ('dead', 'failed')") == 4
    html = admin.post(f"/workflows/{root}/retry-dead").get_data(as_text=True)
    assert 'class="confirm-count" data-count="1"' in html  # the one that failed on its own
    assert "<strong>3</strong> job(s) that\n    ended only because a dependency failed" in html, html
