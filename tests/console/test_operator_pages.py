"""The operator's pages on what a real worker produced: charts and the summary line from the stats
its ack batches wrote, a dead job's detail (last worker, runtime, every attempt, the way back), the
dead-letter rows' expandable tracebacks, and the queue page's bulk actions through a confirmation.
"""

from __future__ import annotations

import re
from typing import Any

from skiplock import enqueue, enqueue_many
from tests.support.helpers import scalar, wait_for


def _worker_outcomes(conn: Any, spawn_worker: Any) -> dict[str, int]:
    """A real worker runs 6 jobs that succeed, 2 that fail once then succeed, and 3 that die."""
    ids = enqueue_many([("t1", {"n": i}) for i in range(6)]
                       + [{"queue": "t1", "payload": {"fail_times": 1, "n": i}, "max_attempts": 3} for i in range(2)]
                       + [{"queue": "t1", "payload": {"fail_times": 9, "n": i}, "max_attempts": 1} for i in range(3)])
    worker = spawn_worker(SKIPLOCK_QUEUES="t1", SKIPLOCK_BACKOFF_BASE="0.05", SKIPLOCK_BACKOFF_CAP="0.05")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status <> 'dead'") == 0
             and scalar(conn, "SELECT coalesce(sum(completed), 0) FROM job_stats WHERE queue = 't1'") == 8,
             timeout=60, message="the worker to finish every job")
    worker.terminate()
    return {"dead": ids[-1], "worker_pid": worker.pid}


def test_charts_and_summary_from_a_real_worker(admin: Any, conn: Any, spawn_worker: Any) -> None:
    _worker_outcomes(conn, spawn_worker)
    html = admin.get("/").get_data(as_text=True)
    numbers = dict(re.findall(r'data-sum="([a-z-]+)">(?:<a [^>]*>)?([\d,.+]+)', html))
    # 8 succeeded + 2 retried + 3 dead runs finished today; 2 + 3 of them raised
    assert numbers["processed"] == "13" and numbers["failed"] == "5" and numbers["dead"] == "3", numbers
    assert float(numbers["jobs-per-s"]) > 0
    row = re.search(r'<tr[^>]*data-queue="t1".*?</tr>', html, re.S).group(0)  # type: ignore[union-attr]
    titles = re.findall(r"<title>[^<]*UTC t1: (\d+) (succeeded|retried|dead)</title>", row)
    by_series: dict[str, int] = {}
    for n, series in titles:
        by_series[series] = by_series.get(series, 0) + int(n)
    assert by_series == {"succeeded": 8, "retried": 2, "dead": 3}
    # the big chart has a time axis and a scale; the range selector changes the buckets
    # (its y labels sit inside the plot, left-aligned, since issue 36: a right-aligned margin clipped "10,000")
    assert re.search(r'<text class="inside y-label" x="[\d.]+" y="[\d.]+">\d+</text>', html)
    day = admin.get("/?range=24h").get_data(as_text=True)
    assert "per 15 minutes" in day and 'aria-current="true">24h' in day
    assert admin.get("/?range=1y").status_code == 400


def test_dead_job_detail_and_expandable_traceback(admin: Any, conn: Any, spawn_worker: Any) -> None:
    made = _worker_outcomes(conn, spawn_worker)
    job = made["dead"]
    html = admin.get(f"/jobs/{job}", headers={"Referer": "http://localhost/dead/?queue=t1"}).get_data(as_text=True)
    last_worker = re.search(r'<dd class="last-worker">([^<]+)</dd>', html).group(1)  # type: ignore[union-attr]
    assert str(made["worker_pid"]) in last_worker  # worker ids carry host and pid
    # the failed run's own handler time (from its attempt record), not the ack batch's wait
    assert re.search(r'<dd class="runtime">[\d.]+ms</dd>', html), html
    assert re.search(r'<time datetime="[^"]+" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC">[^<]*ago</time>', html)
    assert 'href="/dead/?queue=t1">← back to the list' in html
    # without a console referrer the way back is the job's tab on its queue page
    assert 'href="/queues/t1?status=dead">← back' in admin.get(f"/jobs/{job}").get_data(as_text=True)
    dead = admin.get("/dead/?queue=t1&window=all").get_data(as_text=True)
    rows = re.findall(r'<details class="tb" data-key="tb-\d+"><summary>(.*?)</summary><pre>(.*?)</pre>', dead, re.S)
    assert len(rows) == 3
    for summary, traceback in rows:
        assert summary.startswith("RuntimeError: planned failure on attempt 1")
        assert traceback.startswith("Traceback (most recent call last):") and "behave" in traceback


def test_queue_page_tabs_bulk_cancel_with_confirmation(admin: Any, conn: Any) -> None:
    ids = [enqueue("bulkq", {"n": i}, priority=i % 3) for i in range(5)]
    later = enqueue("bulkq", {"n": "later"}, delay=3600)
    html = admin.get("/queues/bulkq").get_data(as_text=True)
    tabs = dict(re.findall(r'data-tab="([a-z]+)"[^>]*>[a-z]+ <span class="count">([\d,+]+)</span>', html))
    assert tabs == {"ready": "5", "scheduled": "1", "running": "0", "dead": "0", "failed": "0", "succeeded": "0"}
    # claim order: priority 2 first; sorted by run_at instead: the oldest first
    order = [int(i) for i in re.findall(r'<tr data-job-id="(\d+)"', html)]
    assert order == sorted(ids, key=lambda i: (-(ids.index(i) % 3), i))
    by_run_at = admin.get("/queues/bulkq?status=ready&sort=run_at").get_data(as_text=True)
    assert [int(i) for i in re.findall(r'<tr data-job-id="(\d+)"', by_run_at)] == ids
    # bulk cancel of two: a confirmation first, nothing changed yet
    chosen = ids[:2]
    confirm = admin.post("/queues/bulkq/jobs", data={"action": "cancel", "status": "ready", "ids": chosen})
    assert confirm.status_code == 200 and "Cancel 2 jobs of queue" in confirm.get_data(as_text=True)
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'bulkq' AND status = 'queued'") == 6
    done = admin.post("/queues/bulkq/jobs", data={"action": "cancel", "status": "ready", "ids": chosen,
                                                  "confirm": "yes"})
    assert done.status_code == 303
    assert {r[0] for r in conn.execute("SELECT id FROM jobs WHERE status = 'failed'")} == set(chosen)
    # an action the tab does not offer is refused, and the scheduled job is untouched
    assert admin.post("/queues/bulkq/jobs", data={"action": "purge", "status": "ready", "ids": [later],
                                                  "confirm": "yes"}).status_code == 400
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (later,)) == "queued"
    assert scalar(conn, "SELECT count(*) FROM audit_log WHERE action = 'cancel selected'") == 1
