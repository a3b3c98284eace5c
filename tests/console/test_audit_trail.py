"""Every console action leaves a row in audit_log: who, what, how many, and which jobs or filter."""

from __future__ import annotations

from tests.support.factory import make_job


def _rows(conn):
    return conn.execute("SELECT actor, role, action, count, detail FROM audit_log ORDER BY id").fetchall()


def test_console_actions_are_written_to_the_audit_table(admin, conn):
    job = make_job(conn, "t1", "dead", attempts=5, last_error="boom")
    assert admin.post("/dead/action?action=retry", {"one": str(job), "confirm": "yes"}).status_code == 303
    assert admin.post("/queues/t1/pause", {"confirm": "yes"}).status_code == 303
    assert admin.post("/queues/t1/resume", {"confirm": "yes"}).status_code == 303
    rows = _rows(conn)
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("ops-admin", "admin", "retry selected", 1),
        ("ops-admin", "admin", "pause queue", 0),
        ("ops-admin", "admin", "resume queue", 0),
    ]
    assert rows[0][4]["ids"] == [job]
    assert rows[1][4]["queue"] == "t1"


def test_a_refused_action_writes_nothing(viewer, conn):
    assert viewer.post("/queues/t1/pause").status_code == 403
    assert _rows(conn) == []


def test_the_audit_page_lists_actions_escaped_and_pages_by_id(admin, conn, monkeypatch):
    from skiplock.webapp.pages import audit as audit_page

    monkeypatch.setattr(audit_page, "PAGE_SIZE", 2)
    for queue in ("q1", "q2", "<b>q3</b>"):
        assert admin.post(f"/queues/{queue}/pause", data={"unknown_ok": "yes", "confirm": "yes"}).status_code == 303
    first = admin.get("/audit/").get_data(as_text=True)
    assert "&lt;b&gt;q3&lt;/b&gt;" in first and "<b>q3" not in first
    assert 'href="/queues/q2">q2</a>' in first and 'href="/queues/q1"' not in first
    last_id = conn.execute("SELECT min(id) FROM audit_log").fetchone()[0]
    older = admin.get(f"/audit/?before={last_id + 1}").get_data(as_text=True)
    assert 'href="/queues/q1">q1</a>' in older and "Older" not in older
    assert 'href="/audit/"' in first  # the nav link
    assert admin.get("/audit/?before=-1").status_code == 400
    assert admin.get("/audit/?before=%00").status_code == 400


def test_the_pruner_keeps_audit_rows_for_the_retention_only(admin, conn, db_url):
    from skiplock.core.plumbing.config import load_settings
    from skiplock.core.plumbing.db import make_pool
    from skiplock.services.pruner import Pruner

    for queue in ("old1", "old2", "old3", "new"):
        assert admin.post(f"/queues/{queue}/pause", data={"unknown_ok": "yes", "confirm": "yes"}).status_code == 303
    # age the first three rows past a one-day retention (the clock cannot be moved for the server)
    conn.execute("UPDATE audit_log SET at = now() - interval '2 days' WHERE detail->>'queue' LIKE 'old%%'")
    settings = load_settings(env={}, audit_retention=86400.0)
    pool = make_pool(db_url, "skiplock-test-audit-prune", size=1, open_wait=True)
    try:
        assert Pruner(pool, settings, batch=2).run_once() == 3  # two batches: 2 + 1
        assert Pruner(pool, settings, batch=2).run_once() == 0
    finally:
        pool.close()
    assert [r[4]["queue"] for r in _rows(conn)] == ["new"]


def test_an_action_and_its_audit_row_commit_together(admin, conn, monkeypatch):
    """If the trail row cannot be written, the action is rolled back: no change goes unaudited."""
    import pytest

    from skiplock.webapp import web

    job = make_job(conn, "t1", "dead", last_error="boom", attempts=5)

    def broken(*args, **kwargs):
        raise RuntimeError("audit_log is unavailable")

    monkeypatch.setattr(web.audit_trail, "record", broken)
    with pytest.raises(RuntimeError, match="audit_log is unavailable"):
        admin.post(f"/jobs/{job}/retry", {"confirm": "yes"})
    assert conn.execute("SELECT status::text FROM jobs WHERE id = %s", (job,)).fetchone()[0] == "dead"
    monkeypatch.undo()
    assert admin.post(f"/jobs/{job}/retry", {"confirm": "yes"}).status_code == 303
    assert conn.execute("SELECT status::text FROM jobs WHERE id = %s", (job,)).fetchone()[0] == "queued"
    assert conn.execute("SELECT action, count FROM audit_log").fetchall() == [("retry", 1)]
