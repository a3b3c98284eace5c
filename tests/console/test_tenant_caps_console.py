"""Per-tenant limits on the console and in "why isn't it running": the queue page shows the limits and
the tenants at them, the job page, the queue page and `skiplock jobs show` name the tenant's limit.

Jobs come from enqueue, the limits from the CLI, and a real worker holds the tenants at their limit.
"""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest

from skiplock import enqueue
from skiplock.tools.cli import main as cli
from tests.console.test_why_not_running import reasons
from tests.support.flow_handlers import FLOW_RUNS
from tests.support.helpers import scalar, wait_for

QUEUE = "flow_tenant_capped"


def test_a_tenant_at_its_limit_is_named_everywhere(admin: Any, conn: Any, spawn_worker: Any,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    conn.execute(FLOW_RUNS)
    assert cli(["queues", "limit", QUEUE, "--per-tenant-concurrency", "2"]) == 0
    busy = [enqueue(QUEUE, {"sleep": 120, "tenant": "acme"}, tenant="acme") for _ in range(2)]
    waiting = enqueue(QUEUE, {"tenant": "acme"}, tenant="acme")
    heavy = enqueue(QUEUE, {"sleep": 120, "tenant": "globex"}, tenant="globex", weight=2)
    spawn_worker(SKIPLOCK_TASKS="tests.support.flow_handlers", SKIPLOCK_QUEUES=QUEUE, SKIPLOCK_CONCURRENCY="6")
    running = "SELECT count(*) FROM jobs WHERE id = ANY(%s) AND status = 'running'"
    wait_for(lambda: scalar(conn, running, ([*busy, heavy],)) == 3, timeout=60, message="the first jobs to start")

    found = reasons(admin, f"/jobs/{waiting}")
    assert "tenant_limit" in found, found
    assert "'acme' is at its per-tenant limit" in found["tenant_limit"] and "2 of 2 running" in found["tenant_limit"]
    assert "other tenants' jobs go on" in found["tenant_limit"]
    queue_reasons = reasons(admin, f"/queues/{QUEUE}")
    assert "'acme' (2 running)" in queue_reasons["tenant_limit"], queue_reasons
    assert "'globex' (2 running)" in queue_reasons["tenant_limit"]  # one job of weight 2

    html = admin.get(f"/queues/{QUEUE}").get_data(as_text=True)
    text = unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))
    assert "Per-tenant limits (each tenant of the queue, on top of the limits above): concurrency 2" in text
    rows = dict(re.findall(r'<tr data-tenant="([^"]+)">(.*?)</tr>', html, re.S))
    assert set(rows) == {"acme", "globex"}
    assert all("at its limit" in row for row in rows.values())

    assert cli(["jobs", "show", str(waiting)]) == 0
    out = capsys.readouterr().out
    assert "why it is not running:" in out and "per-tenant limit of queue" in out
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (waiting,)) == "queued"


def test_queue_page_without_per_tenant_limits_says_how_to_set_them(admin: Any) -> None:
    enqueue("plain_q", {}, tenant="acme")
    html = admin.get("/queues/plain_q").get_data(as_text=True)
    assert "--per-tenant-concurrency N --per-tenant-rate 10/s" in html
    assert 'class="tenants-at-limit"' not in html
