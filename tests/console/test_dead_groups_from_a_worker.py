"""Dead-letter grouping on what a real worker stores: whole tracebacks, grouped by exception.

A worker process runs handlers that raise ConnectionError, ValueError, KeyError and a chained custom
exception, each with the job's own order number in its message; with max_attempts=1 every job ends
dead with its traceback in last_error.
"""

from __future__ import annotations

import re
from typing import Any

from markupsafe import escape as html_escape

from skiplock import enqueue_many
from skiplock.core.error_summary import group_key, headline
from tests.support.helpers import scalar, wait_for

KINDS = {"connection": 5, "value": 4, "key": 3, "chained": 2}
GROUPS = {
    "connection": "ConnectionError: POST https://api.example.com/orders/<n>?…: 503",
    "value": "ValueError: order <n> has no shipping address",
    "key": "KeyError: 'sku-<n>'",
    "chained": "tests.support.failing_handlers.PaymentDeclined: card ending <n> declined",
}


def _worker_made_dead_jobs(conn: Any, spawn_worker: Any) -> dict[str, list[int]]:
    ids: dict[str, list[int]] = {}
    order = 1000
    for kind, n in KINDS.items():
        jobs = []
        for _ in range(n):
            order += 17
            jobs.append({"queue": "orders", "payload": {"kind": kind, "order": order}, "max_attempts": 1})
        ids[kind] = enqueue_many(jobs)
    worker = spawn_worker(SKIPLOCK_TASKS="tests.support.failing_handlers", SKIPLOCK_QUEUES="orders")
    total = sum(KINDS.values())
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'dead'") == total, timeout=60,
             message="the worker to kill every job")
    worker.terminate()
    return ids


def test_real_tracebacks_group_by_exception_and_filter(admin: Any, conn: Any, spawn_worker: Any) -> None:
    ids = _worker_made_dead_jobs(conn, spawn_worker)
    # what the worker stored: a whole traceback, and beside it the headline and group
    stored = conn.execute("SELECT last_error, error_headline, error_group FROM jobs WHERE id = %s",
                          (ids["connection"][0],)).fetchone()
    assert stored[0].startswith("Traceback (most recent call last):") and "_call_the_api" in stored[0]
    assert stored[1].startswith("ConnectionError: POST https://api.example.com/orders/")
    assert (stored[1], stored[2]) == (headline(stored[0]), group_key(headline(stored[0])))
    chained = conn.execute("SELECT last_error, error_headline FROM jobs WHERE id = %s",
                           (ids["chained"][0],)).fetchone()
    assert "The above exception was the direct cause of the following exception" in chained[0]
    assert chained[1].startswith("tests.support.failing_handlers.PaymentDeclined: card ending ")

    html = admin.get("/dead/?queue=orders").get_data(as_text=True)
    assert "Traceback (most recent call last)" not in html.split("<table", 2)[1]  # not a group name
    for kind, group in GROUPS.items():
        cell = re.search(r"<td class=\"err[^\"]*\"[^>]*><a [^>]*>" + re.escape(str(html_escape(group)))
                         + r"</a>.*?</td>\s*<td class=\"num\"[^>]*>(\d+)</td>", html, re.S)
        assert cell, f"no group {group!r} on the page"
        assert int(cell.group(1)) == KINDS[kind], (group, cell.group(1))

    # the group's filter finds exactly its jobs
    page = admin.get("/dead/", query_string={"queue": "orders", "error": GROUPS["connection"]}).get_data(as_text=True)
    listed = {int(i) for i in re.findall(r'data-job-id="(\d+)"', page)}
    assert listed == set(ids["connection"])

    # "purge all matching" names the group and counts only its jobs, then purges only them
    confirm = admin.post("/dead/action", data={"action": "purge", "scope": "matching", "queue": "orders",
                                               "error": GROUPS["value"], "status": "dead", "window": "24h"})
    text = confirm.get_data(as_text=True)
    assert confirm.status_code == 200 and "ValueError: order &lt;n&gt; has no shipping address" in text
    assert re.search(r"<strong>4</strong>", text), text
    as_of = re.search(r'name="as_of" value="([^"]+)"', text)
    assert as_of
    done = admin.post("/dead/action", data={"action": "purge", "scope": "matching", "queue": "orders",
                                            "error": GROUPS["value"], "status": "dead", "window": "24h",
                                            "confirm": "yes", "as_of": as_of.group(1)})
    assert done.status_code == 303
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = ANY(%s)", (ids["value"],)) == 0
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'dead'") == sum(KINDS.values()) - 4
