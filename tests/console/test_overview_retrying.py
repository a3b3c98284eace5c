"""The overview's "waiting to retry": scheduled jobs a real worker put back after a failed attempt, counted
per queue and priority (page_queries.RETRYING_IN_QUEUE), not the jobs merely enqueued for later."""

from __future__ import annotations

import re
from typing import Any

from skiplock import enqueue_many
from tests.support.helpers import scalar, wait_for


def test_waiting_to_retry_counts_the_failed_attempts_across_queues_and_priorities(admin: Any, conn: Any,
                                                                                    spawn_worker: Any) -> None:
    # 3 + 2 jobs fail their first attempt and wait for a 10-minute backoff, in two queues and priorities;
    # 4 jobs are enqueued for an hour from now and have not run; 2 ready jobs succeed
    enqueue_many([{"queue": "t1", "payload": {"fail_times": 1, "n": i}} for i in range(3)]
                 + [{"queue": "t2", "priority": 5, "payload": {"fail_times": 1, "n": i}} for i in range(2)]
                 + [{"queue": q, "payload": {"n": i}, "delay": 3600} for q in ("t1", "t3") for i in range(2)]
                 + [("t1", {"n": 9}), ("t2", {"n": 9})])
    worker = spawn_worker(SKIPLOCK_QUEUES="t1,t2", SKIPLOCK_BACKOFF_BASE="600", SKIPLOCK_BACKOFF_CAP="600",
                          SKIPLOCK_POLL_INTERVAL="0.05")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'queued' AND attempts = 1") == 5,
             timeout=60, message="the five failed attempts to wait for their backoff")
    worker.terminate()
    html = admin.get("/").get_data(as_text=True)
    numbers = dict(re.findall(r'data-sum="([a-z-]+)">(?:<a [^>]*>)?([\d,.+]+)', html))
    # the summary's "scheduled for later" and "waiting to retry" are apart: 4 + 5, not 9 beside 5
    assert numbers["retrying"] == "5" and numbers["scheduled"] == "4", numbers
