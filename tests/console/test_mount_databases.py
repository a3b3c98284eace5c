"""The console mounted in a host Flask app over two databases: mount(app, prefix, databases=...).

orders and billing are two real databases on the test server. Their job ids overlap (each starts at
1), so a page or an action that reached the wrong database would show or change the wrong job. The
dead job comes from a real worker running a handler that raises PermanentFailure.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from flask import Flask

from skiplock import enqueue, enqueue_many
from skiplock.core.errors import ConfigError
from skiplock.webapp import mount
from skiplock.webapp.db import EXTENSION, close_app
from skiplock.webapp.pages.databases import CONSOLES
from tests.support.helpers import scalar, wait_for
from tests.support.host_app import PREFIX, build_host

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def row(html: str, name: str) -> str:
    """The overview's row of database `name`, as text: 'up orders up 2 0 0 ...'."""
    match = re.search(rf'<tr data-database="{name}" class="(up|down)">(.*?)</tr>', html, re.S)
    assert match, f"no row for {name}"
    return match.group(1) + " " + re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", match.group(2))).strip()


def test_one_mount_over_two_databases(db_url: str, fresh_db_url: str, spawn_worker: Any) -> None:
    orders, billing = db_url, fresh_db_url
    with psycopg.connect(orders) as conn:
        waiting = enqueue_many([("t1", {"n": i}) for i in range(2)], conn=conn)
    with psycopg.connect(billing) as conn:
        dead_id = enqueue("t1", {"permanent": True}, conn=conn)
    assert dead_id in waiting  # the same id names a job in each database
    worker = spawn_worker(url=billing, SKIPLOCK_QUEUES="t1")
    with psycopg.connect(billing, autocommit=True) as conn:
        wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (dead_id,)) == "dead",
                 message="the worker to kill billing's job")
    worker.terminate()

    host = build_host(databases=f"orders={orders},billing={billing}")  # SKIPLOCK_DATABASES's syntax
    try:
        anon = host.test_client()
        for path in ("/", "/databases/", "/db/billing/dead/", f"/db/billing/jobs/{dead_id}"):
            assert anon.get(PREFIX + path).status_code == 403, path  # the host's authorize hook decides

        admin = host.test_client()
        admin.get("/login?user=alice")
        overview = admin.get(f"{PREFIX}/databases/").get_data(as_text=True)
        assert row(overview, "orders").startswith("up orders up 2 0 0"), row(overview, "orders")
        assert row(overview, "billing").startswith("up billing up 0 0 1"), row(overview, "billing")
        assert admin.get(f"{PREFIX}/").status_code == 200  # the first database's console at the prefix

        # the switcher on every page, this database marked; each page reads its own database only
        dead_page = admin.get(f"{PREFIX}/db/billing/dead/").get_data(as_text=True)
        assert f'href="{PREFIX}/db/orders/"' in dead_page
        assert f'href="{PREFIX}/db/billing/" aria-current="true"' in dead_page
        assert f"{PREFIX}/db/billing/jobs/{dead_id}" in dead_page
        assert f"/jobs/{dead_id}" not in admin.get(f"{PREFIX}/db/orders/dead/").get_data(as_text=True)
        billing_job = admin.get(f"{PREFIX}/db/billing/jobs/{dead_id}").get_data(as_text=True)
        orders_job = admin.get(f"{PREFIX}/db/orders/jobs/{dead_id}").get_data(as_text=True)
        assert "permanent" in billing_job and "permanent" not in orders_job

        viewer = host.test_client()
        viewer.get("/login?user=bob")
        page = viewer.get(f"{PREFIX}/db/billing/jobs/{dead_id}").get_data(as_text=True)
        token = TOKEN.search(page)
        assert token
        assert viewer.post(f"{PREFIX}/db/billing/jobs/{dead_id}/retry",
                           data={"csrf_token": token.group(1), "confirm": "yes"}).status_code == 403  # bob is read-only

        token = TOKEN.search(billing_job)
        assert token
        done = admin.post(f"{PREFIX}/db/billing/jobs/{dead_id}/retry",
                          data={"csrf_token": token.group(1), "confirm": "yes"})
        assert done.status_code == 303 and done.headers["Location"].startswith(f"{PREFIX}/db/billing/jobs/{dead_id}")
        with psycopg.connect(billing) as conn:
            assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (dead_id,)) == "queued"
            trail = conn.execute("SELECT actor, action, detail->>'database' FROM audit_log").fetchall()
            assert trail == [("alice", "retry", "billing")]
        with psycopg.connect(orders) as conn:
            assert scalar(conn, "SELECT count(*) FROM audit_log") == 0
            assert scalar(conn, "SELECT payload->>'n' FROM jobs WHERE id = %s", (dead_id,)) == "0"
        assert admin.get("/").get_data(as_text=True) == "host home, user=alice"  # the host's session intact
    finally:
        console = host.extensions["skiplock_console"]
        consoles = list(console.extensions[CONSOLES].values())
        close_app(console)  # every database's console with it
        assert all(EXTENSION not in c.extensions for c in consoles)


URL = "postgresql://ops@db1/orders"


@pytest.mark.parametrize(("databases", "message"), [
    ("orders", "'orders' is not name=url"),
    (" , ", "is empty"),
    ({}, "is empty"),
    ({"bad name": URL}, "'bad name' is not a name"),
    (f"orders={URL},orders={URL}", "'orders' is named twice"),
    ({"billing": "host=db2 dbname"}, "billing's URL is not a PostgreSQL connection string"),
    ({"billing": ""}, "'billing' has no URL"),
    (42, "must be 'name=url,name=url' or a {name: url} mapping"),
])
def test_bad_databases_are_refused_at_mount_time(databases: Any, message: str) -> None:
    app = Flask("h")
    with pytest.raises(ConfigError, match=re.escape("mount: databases=")) as refused:
        mount(app, PREFIX, authorize=lambda r: "admin", databases=databases)
    assert message in str(refused.value)
    assert "skiplock_console" not in app.extensions  # nothing was mounted


def test_databases_with_one_database_argument_is_refused(db_url: str) -> None:
    app = Flask("h")
    with pytest.raises(ConfigError, match="not both"):
        mount(app, PREFIX, authorize=lambda r: "admin", database_url=db_url, databases={"orders": db_url})
