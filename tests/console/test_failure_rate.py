"""A queue's failure-rate chart (issue 36, "failures over time"): a real worker runs jobs that succeed, fail
once then succeed, and die; the queue page's chart says failures / runs per bucket and over the range."""

from __future__ import annotations

import re
from typing import Any

from skiplock import enqueue_many
from tests.support.helpers import scalar, wait_for

BAR = re.compile(r"<title>[^<]*UTC t2: ([\d.]+)% failed \((\d+) of (\d+) runs\)</title>")


def test_the_queue_page_charts_failures_over_runs(admin: Any, conn: Any, spawn_worker: Any) -> None:
    # 4 succeed; 2 fail once, then succeed; 2 die: 10 runs, 4 of them failed (2 retried + 2 dead)
    enqueue_many([("t2", {"n": i}) for i in range(4)]
                 + [{"queue": "t2", "payload": {"fail_times": 1, "n": i}, "max_attempts": 3} for i in range(2)]
                 + [{"queue": "t2", "payload": {"permanent": True, "n": i}} for i in range(2)]
                 + [("t3", {"n": i}) for i in range(3)])  # another queue's runs are not t2's
    worker = spawn_worker(SKIPLOCK_QUEUES="t2,t3", SKIPLOCK_BACKOFF_BASE="0.05", SKIPLOCK_BACKOFF_CAP="0.05",
                          SKIPLOCK_POLL_INTERVAL="0.05")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status <> 'dead'") == 0
             and scalar(conn, "SELECT coalesce(sum(completed + retried + dead), 0) FROM job_stats") == 13,
             timeout=60, message="the worker to finish every job")
    worker.terminate()

    for span in ("1h", "24h", "7d"):
        page = admin.get(f"/queues/t2?range={span}").get_data(as_text=True)
        figure = re.search(r'<figure class="chart failure-rate" id="failure-rate" data-failures="(\d+)" '
                           r'data-runs="(\d+)"', page)
        assert figure and figure.groups() == ("4", "10"), span
        assert "40.0% of 10 runs failed" in page and "(4 retried, dead or reaped)" in page
        bars = BAR.findall(page)
        # the runs fall in one or two buckets (a minute may turn meanwhile): together they are the range's
        assert sum(int(f) for _, f, _ in bars) == 4 and sum(int(r) for _, _, r in bars) == 10, bars
        assert all(abs(float(rate) - 100.0 * int(f) / int(r)) < 0.06 for rate, f, r in bars), bars
        assert f'aria-current="true">{span}</a>' in page
    # the scale fits the highest bucket's rate (40% -> a 50% scale when they share one bucket)
    assert re.search(r'data-top="(50|100)"', admin.get("/queues/t2").get_data(as_text=True))

    calm = admin.get("/queues/t3").get_data(as_text=True)
    assert 'data-failures="0" data-runs="3"' in calm and "0.0% of 3 runs failed" in calm
    assert admin.get("/queues/t2?range=1y").status_code == 400
    idle = admin.get("/queues/nothing-ran-here").get_data(as_text=True)
    assert 'data-runs="0"' in idle and "no runs" in idle
