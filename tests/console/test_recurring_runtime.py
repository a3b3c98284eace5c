"""The Recurring page with schedules made at runtime: create, edit, backfill, pause, delete (each audited),
cron in plain words with the next fires, the 24-hour timeline, and code-defined schedules left alone."""

from __future__ import annotations

from skiplock import schedules
from skiplock.services.recurring_defs import define
from skiplock.services.recurring_store import sync_definitions


def actions(conn) -> list[str]:
    return [r[0] for r in conn.execute("SELECT action FROM audit_log ORDER BY id")]


def test_create_edit_backfill_pause_and_delete_from_the_page(admin, conn):
    made = admin.post("/recurring/new", {"name": "report:acme", "queue": "t1", "kind": "cron", "when": "0 7 * * *",
                                        "timezone": "Europe/Berlin", "tenant": "acme", "payload": '{"c": 1}'})
    assert made.status_code == 303
    html = admin.get("/recurring/").get_data(as_text=True)
    assert "every day at 07:00 (Europe/Berlin)" in html and 'data-origin="runtime"' in html
    assert 'data-timeline-row="report:acme"' in html
    row = schedules.get("report:acme")
    assert row is not None and (row.tenant, row.payload) == ("acme", {"c": 1})
    form = admin.get("/recurring/report:acme/edit").get_data(as_text=True)
    assert "0 7 * * *" in form and "backfill" in form
    assert admin.post("/recurring/report:acme/edit", {"queue": "t1", "kind": "interval", "when": "30m",
                                                     "timezone": "UTC", "payload": '{"c": 2}'}).status_code == 303
    changed = schedules.get("report:acme")
    assert changed is not None and (changed.kind, changed.schedule, changed.payload) == ("interval", "30m", {"c": 2})
    assert "every 30 minutes" in admin.get("/recurring/").get_data(as_text=True)
    # the backfill first says how many jobs it would enqueue (the backfill itself, rolled back), and enqueues none
    due = "SELECT count(*) FROM jobs WHERE queue = 't1' AND run_at <= now()"
    asked = admin.post("/recurring/report:acme/backfill", {"hours": "2"}).get_data(as_text=True)
    assert conn.execute(due).fetchone()[0] == 0
    counted = int(asked.split("Backfill schedule report:acme: enqueue ", 1)[1].split(" ", 1)[0])
    assert admin.post("/recurring/report:acme/backfill", {"hours": "2", "confirm": "yes"}).status_code == 303
    backfilled = conn.execute(due).fetchone()[0]
    assert backfilled in (4, 5) and counted in (4, 5)  # the half hours of the last two hours
    # pause and delete ask first too, and change nothing until confirmed
    assert "Pause schedule report:acme?" in admin.post("/recurring/report:acme/pause").get_data(as_text=True)
    assert "Delete schedule report:acme?" in admin.post("/recurring/report:acme/delete").get_data(as_text=True)
    still = schedules.get("report:acme")
    assert still is not None and still.enabled
    assert admin.post("/recurring/report:acme/pause", {"confirm": "yes"}).status_code == 303
    assert admin.post("/recurring/report:acme/delete", {"confirm": "yes"}).status_code == 303
    assert schedules.get("report:acme") is None
    assert actions(conn) == ["create schedule", "edit schedule", "backfill schedule", "pause schedule",
                             "delete schedule"]


def test_bad_input_is_flashed_and_nothing_is_written(admin, conn):
    for form, message in [
        ({"name": "x", "queue": "t1", "kind": "cron", "when": "0 25 * * *"}, "invalid cron schedule"),
        ({"name": "x", "queue": "t1", "kind": "cron", "when": "0 7 * * *", "timezone": "Mars/Base"},
         "unknown time zone"),
        ({"name": "x", "queue": "t1", "kind": "interval", "when": "5m", "payload": "{nope"}, "not valid JSON"),
    ]:
        page = admin.post("/recurring/new", form, follow_redirects=True).get_data(as_text=True)
        assert message in page
    schedules.create("taken", "t1", {}, every="1h")
    page = admin.post("/recurring/new", {"name": "taken", "queue": "t2", "kind": "interval", "when": "5m"},
                      follow_redirects=True).get_data(as_text=True)
    assert "already exists" in page
    assert conn.execute("SELECT count(*) FROM recurring_schedules").fetchone()[0] == 1
    assert actions(conn) == []


def test_code_defined_schedules_are_marked_and_not_editable(admin, conn):
    sync_definitions(conn, [define("nightly", queue="t1", cron="0 2 * * *")], ["t1"])
    html = admin.get("/recurring/").get_data(as_text=True)
    assert 'data-origin="code"' in html and "/recurring/nightly/edit" not in html
    assert admin.get("/recurring/nightly/edit").status_code == 404
    page = admin.post("/recurring/nightly/delete", {"confirm": "yes"}, follow_redirects=True).get_data(as_text=True)
    assert "defined in code" in page
    assert conn.execute("SELECT count(*) FROM recurring_schedules").fetchone()[0] == 1


def test_a_read_only_login_cannot_create(viewer, conn):
    response = viewer.post("/recurring/new", {"name": "x", "queue": "t1", "kind": "interval", "when": "5m"})
    assert response.status_code in (302, 303, 403)
    assert conn.execute("SELECT count(*) FROM recurring_schedules").fetchone()[0] == 0


def test_the_timeline_names_the_busiest_minutes_of_the_next_24_hours(admin, conn):
    # three daily reports at 07:00 and a half-hourly sync: 07:00 is the overloaded minute
    for n in range(3):
        schedules.create(f"report:{n}", "t1", {}, cron="0 7 * * *")
    schedules.create("sync", "t1", {}, every="30m")
    schedules.create("evening", "t1", {}, cron="15 19 * * *")
    html = admin.get("/recurring/").get_data(as_text=True)
    busiest = html.split("data-busiest-minutes", 1)[1].split("</p>", 1)[0]
    first = busiest.split("data-busy-minute=", 1)[1]
    assert first.startswith('"07:00"') and "4 fires of 4 schedules" in first.split("</span>", 1)[0]
    assert all(f"report:{n}" in first.split("</span>", 1)[0] for n in range(3))
    assert 'data-busy-minute="19:15"' not in busiest  # one fire: not among the three busiest
