"""The queue page's flow-control panel (templates/_flow.html): limits, tenant backlogs, versions."""

from __future__ import annotations

from skiplock import enqueue_many, limits


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
