"""The queue page's flow-control panel (templates/queues/_flow.html): limits, tenant backlogs, versions."""

from __future__ import annotations

from skiplock import enqueue_many
from skiplock.core.features import limits


def test_queue_page_shows_limits_tenants_and_version_mix(admin, conn):
    limits.set_limit(conn, "t1", concurrency=5, rate="100/s", actor="test")
    enqueue_many([{"queue": "t1", "payload": {}, "tenant": "acme"} for _ in range(3)]
                 + [{"queue": "t1", "payload": {}, "tenant": "<b>globex</b>", "version": 3}])
    conn.execute("INSERT INTO workers (id, host, pid, queues, concurrency, task_versions) "
                 "VALUES ('w', 'h', 1, '{t1}', 4, '{\"t1\": 2}')")
    html = admin.get("/queues/t1").get_data(as_text=True)
    assert "concurrency <strong>5</strong> (0 running)" in html
    assert "rate <strong>100/s</strong>" in html and "tolerance 10 per second" in html
    assert "<td>acme</td><td class=\"num\">3</td>" in html
    assert "&lt;b&gt;globex&lt;/b&gt;" in html and "<b>globex</b>" not in html  # escaped
    assert "live workers run up to version 2" in html
    assert "3 <span class=\"badge warn\">no live worker</span>" in html


def test_queue_page_without_flow_control(admin, conn):
    html = admin.get("/queues/t2").get_data(as_text=True)
    assert "No global limit" in html


def test_limits_set_and_cleared_from_the_console_and_bad_input_changes_nothing(admin, viewer, conn):
    assert admin.post("/queues/t1/limit", data={"concurrency": "3", "rate": "50/s"}).status_code == 303
    assert _limit(conn) == ("t1", 3, 50.0)
    page = admin.get("/queues/t1").get_data(as_text=True)
    assert "limited to concurrency 3 and rate 50/s" in page and "concurrency <strong>3</strong>" in page
    for bad in ({"concurrency": "0"}, {"concurrency": "many"}, {"rate": "fast"}, {"rate": "-5/s"}):
        assert admin.post("/queues/t1/limit", data=bad).status_code == 303
        assert "Limits of t1 not changed" in admin.get("/queues/t1").get_data(as_text=True)
        assert _limit(conn) == ("t1", 3, 50.0)
    assert viewer.post("/queues/t1/limit", data={"clear": "yes"}).status_code == 403  # read-only login
    assert admin.post("/queues/t1/limit", data={"clear": "yes"}).status_code == 303
    assert limits.list_limits(conn) == []
    assert conn.execute("SELECT count(*) FROM audit_log WHERE action = 'limit queue'").fetchone()[0] == 2


def _limit(conn):
    [row] = limits.list_limits(conn)
    return row.queue, row.concurrency, row.rate
