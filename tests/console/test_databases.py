"""One console over three databases (issue 38 part 4); one of them stopped in the middle.

orders and billing live on one private cluster, mail on another that the test stops. Every page
and action of /db/<name>/ works on that database alone, /databases/ has a row per database, a
stopped database shows as down there while the others' rows and pages keep answering, and
`skiplock doctor --all` checks each of them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest

from skiplock import enqueue_many
from skiplock.core.errors import ConfigError
from skiplock.core.plumbing.databases import parse_databases
from skiplock.webapp.db import close_app
from skiplock.webapp.multi_app import create_multi_app
from skiplock.webapp.pages.databases import CONSOLES
from skiplock.webapp.settings import Account
from tests.conftest import REPO
from tests.support.helpers import scalar
from tests.support.pgcluster import ThrowawayCluster

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
READY = {"orders": 3, "billing": 5, "mail": 7}


@pytest.fixture(scope="module")
def three() -> Iterator[tuple[dict[str, str], ThrowawayCluster]]:
    first, second = ThrowawayCluster(), ThrowawayCluster()
    try:
        urls = {"orders": first.migrated_database("orders"), "billing": first.migrated_database("billing"),
                "mail": second.migrated_database("mail")}
        for name, url in urls.items():
            with psycopg.connect(url, autocommit=True) as conn:
                enqueue_many([("t1", {"n": i}) for i in range(READY[name])], conn=conn)
        yield urls, second
    finally:
        first.destroy()
        second.destroy()


def row(html: str, name: str) -> str:
    match = re.search(rf'<tr data-database="{name}" class="(up|down)">(.*?)</tr>', html, re.S)
    assert match, f"no row for {name}"
    return match.group(1) + " " + re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", match.group(2))).strip()


def test_parse_databases_refuses_what_it_cannot_read():
    assert list(parse_databases("a=postgresql://h/a,b=postgresql://h/b?sslmode=require")) == ["a", "b"]
    for bad in ("", "a", "a=", "a=x,a=y", "bad name=x"):
        with pytest.raises(ConfigError):
            parse_databases(bad)


@pytest.mark.slow
def test_one_console_over_three_databases_with_one_stopped(three):
    urls, mail_cluster = three
    app = create_multi_app(urls, {"TESTING": True, "AUTH": True, "SECRET_KEY": "k", "DATABASE_ROW_DEADLINE": 2.0,
                                  "DB_DEADLINE": 2.0, "POOL_TIMEOUT": 2.0,
                                  "ACCOUNTS": [Account("ops", "admin", password="pw")]})
    client = app.test_client()
    stopped = False
    try:
        html = client.get("/login").get_data(as_text=True)
        response = client.post("/login", data={"user": "ops", "password": "pw", "next": "/",
                                               "csrf_token": TOKEN.search(html).group(1)})  # type: ignore[union-attr]
        assert response.status_code == 303

        overview = client.get("/databases/").get_data(as_text=True)
        for name, ready in READY.items():
            assert row(overview, name).startswith(f"up {name} up {ready} 0 0 0"), row(overview, name)

        # every page is scoped to its database: each queue page counts that database's jobs
        billing = client.get("/db/billing/queues/t1").get_data(as_text=True)
        assert client.get("/db/billing/queues/t1").status_code == 200 and 'href="/db/billing/' in billing
        # an action on billing changes billing only, and its audit row names the database
        page = client.get("/db/billing/queues/t1").get_data(as_text=True)
        token = TOKEN.search(page).group(1)  # type: ignore[union-attr]
        # confirmed: Pause first asks (issue 36)
        paused = client.post("/db/billing/queues/t1/pause", data={"csrf_token": token, "confirm": "yes"})
        assert paused.status_code == 303
        with psycopg.connect(urls["billing"]) as conn:
            assert scalar(conn, "SELECT count(*) FROM paused_queues") == 1
            assert scalar(conn, "SELECT detail->>'database' FROM audit_log WHERE action = 'pause queue'") == "billing"
        with psycopg.connect(urls["orders"]) as conn:
            assert scalar(conn, "SELECT count(*) FROM paused_queues") == 0

        mail_cluster.stop("immediate")
        stopped = True
        overview = client.get("/databases/").get_data(as_text=True)
        assert row(overview, "mail").startswith("down mail down"), row(overview, "mail")
        assert row(overview, "orders").startswith("up orders up 3"), row(overview, "orders")
        assert client.get("/db/orders/").status_code == 200
        assert client.get("/db/billing/workers/").status_code == 200
        assert client.get("/db/mail/").status_code == 503
    finally:
        for console in app.extensions[CONSOLES].values():
            close_app(console)
        close_app(app)
        if stopped:
            mail_cluster.start()


@pytest.mark.slow  # 8-25 s each (fuzzing, a second cluster, a subprocess suite): the full run, not the edit-test loop
def test_doctor_all_checks_each_database_and_fails_for_the_one_down(three):
    urls, mail_cluster = three
    mail_cluster.stop("immediate")
    try:
        spec = ",".join(f"{name}={url}" for name, url in urls.items())
        out = subprocess.run([sys.executable, "-m", "skiplock.tools.cli", "doctor", "--all"], cwd=REPO,
                             capture_output=True, text=True, timeout=120,
                             env={"SKIPLOCK_DATABASES": spec, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    finally:
        mail_cluster.start()
    assert out.returncode == 1, out.stdout + out.stderr
    sections = dict(re.findall(r"^== (\w+): (\w+)$", out.stdout, re.M))
    assert set(sections) == {"orders", "billing", "mail"}
    assert sections["mail"] == "FAIL" and "cannot reach the database" in out.stdout
