"""The overview's "What changed?" (issue 36): a queue failing well above its usual rate, and an error group
new in the last hour, each named with a link to its dead letters; "nothing unusual" otherwise."""

from __future__ import annotations

import re
from typing import Any

from skiplock import enqueue_many
from tests.support.helpers import scalar, wait_for


def test_nothing_unusual_on_a_quiet_day(admin: Any) -> None:
    assert "Nothing unusual against the last 24 hours." in admin.get("/changed/", headers={"HX-Request": "true"})\
        .get_data(as_text=True)
    assert 'hx-get="/changed/"' in admin.get("/").get_data(as_text=True)


def test_a_new_failure_is_named_with_its_evidence(admin: Any, conn: Any, spawn_worker: Any) -> None:
    enqueue_many([{"queue": "orders", "payload": {"kind": "customer", "order": 18000 + n}, "max_attempts": 1}
                  for n in range(8)])
    worker = spawn_worker(SKIPLOCK_TASKS="tests.support.failing_handlers", SKIPLOCK_QUEUES="orders")
    wait_for(lambda: scalar(conn, "SELECT coalesce(sum(dead), 0) FROM job_stats") == 8, timeout=60,
             message="eight dead runs counted")
    worker.terminate()
    html = admin.get("/changed/", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert 'data-changed-queue="orders"' in html
    assert re.search(r"failure rate\s+100\.0% in the last hour \(no runs in the 24 hours before\)", html), html
    assert "1 error group new in the last hour" in html
    assert "cus_&lt;n&gt; has no default payment method" in html
    assert re.search(r'href="/dead/\?queue=orders&amp;error=ValueError', html)
