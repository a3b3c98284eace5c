"""In a console over several databases, every page and every confirmation names the database it is about.

An operator with the console open over orders and billing must never purge in one while believing they
are in the other. Every page of every database's console (found from its URL map, so a page added later
is walked too) says which database it shows: in its title, for the browser's tabs, and in a label on the
page; every confirmation says it in its dialog, beside the button that acts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from flask import Flask

from skiplock import enqueue
from skiplock.webapp.db import close_app
from skiplock.webapp.multi_app import create_multi_app
from skiplock.webapp.pages.databases import CONSOLES
from skiplock.webapp.settings import Account
from tests.support.factory import make_job
from tests.support.pgcluster import ThrowawayCluster

pytestmark = pytest.mark.slow

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
# the host's own pages: /databases/ is about every database; the others answer no page of one database
NOT_ONE_DATABASE = {"databases.index", "auth.login", "auth.logout", "static", "healthz", "ops.metrics", "prefs"}


@pytest.fixture(scope="module")
def two() -> Iterator[dict[str, dict[str, Any]]]:
    """orders and billing, each with a queued job, a dead one and a workflow of two."""
    cluster = ThrowawayCluster()
    try:
        found: dict[str, dict[str, Any]] = {}
        for name in ("orders", "billing"):
            url = cluster.migrated_database(name)
            with psycopg.connect(url, autocommit=True) as conn:
                queued = enqueue("t1", {"n": 1}, conn=conn)
                dead = make_job(conn, "t1", "dead", last_error="RuntimeError: boom", attempts=5)
                parent = enqueue("t1", {"n": 2}, conn=conn, delay=3600)
                enqueue("t1", {"n": 3}, conn=conn, depends_on=[parent])
            found[name] = {"url": url, "queued": queued, "dead": dead, "workflow": parent}
        yield found
    finally:
        cluster.destroy()


def _values(seeded: dict[str, Any]) -> dict[str, str]:
    """Path arguments that reach a real page of that database."""
    return {"job_id": str(seeded["queued"]), "name": "t1", "batch_id": "1", "worker_id": "w-test",
            "filename": "console.css"}


def _pages(console: Flask) -> list[tuple[str, str]]:
    """(rule, endpoint) of every GET route of a console, but the ones that are about no one database."""
    return sorted((rule.rule, rule.endpoint) for rule in console.url_map.iter_rules()
                  if "GET" in (rule.methods or ()) and rule.endpoint not in NOT_ONE_DATABASE)


def _url(rule: str, values: dict[str, str], endpoint: str, seeded: dict[str, Any]) -> str:
    if endpoint == "workflows.show":
        values = {**values, "job_id": str(seeded["workflow"])}
    return re.sub(r"<(?:[a-z]+:)?(\w+)>", lambda m: values[m.group(1)], rule)


def _named(html: str, name: str) -> list[str]:
    """What a full page lacks of naming `name`: its title, and the label on the page."""
    missing = []
    title = re.search(r"<title>(.*?)</title>", html, re.S)
    if title is None or f" · {name} · " not in title.group(1):
        missing.append(f"title {title.group(1).strip() if title else None!r}")
    if not re.search(rf'data-database="{name}"[^>]*>\s*Database\s*<strong>{name}</strong>', html):
        missing.append("label")
    return missing


def _confirmation_named(html: str, name: str) -> bool:
    dialog = re.search(r'role="alertdialog".*?</section>', html, re.S)
    return dialog is not None and f"On database <strong data-database>{name}</strong>." in dialog.group(0)


def test_every_page_and_confirmation_names_its_database(two: dict[str, dict[str, Any]]) -> None:
    app = create_multi_app({name: seeded["url"] for name, seeded in two.items()},
                           {"TESTING": True, "AUTH": True, "SECRET_KEY": "k",
                            "ACCOUNTS": [Account("ops", "admin", password="pw")]})
    client = app.test_client()
    try:
        html = client.get("/login").get_data(as_text=True)
        assert client.post("/login", data={"user": "ops", "password": "pw", "next": "/",
                                           "csrf_token": TOKEN.search(html).group(1)}  # type: ignore[union-attr]
                           ).status_code == 303
        consoles = app.extensions[CONSOLES]
        unnamed: dict[str, list[str]] = {}
        walked: set[str] = set()
        # the host's pages are the first database's console (orders); /db/<name>/ each database's own
        for prefix, name, console in [("", "orders", app), *((f"/db/{n}", n, c) for n, c in consoles.items())]:
            for rule, endpoint in _pages(console):
                url = prefix + _url(rule, _values(two[name]), endpoint, two[name])
                response = client.get(url)
                body = response.get_data(as_text=True)
                if response.status_code != 200 or "<html" not in body:
                    continue  # a fragment htmx swaps into a page, a redirect, text for a machine
                walked.add(endpoint)
                if missing := _named(body, name):
                    unnamed[url] = missing
        assert not unnamed, unnamed
        # the pages an operator acts from were really walked, on both databases' consoles
        assert {"overview.index", "dead.index", "jobs.show", "queues.show", "workflows.show", "search.index",
                "workers.index", "parked.index", "audit.index"} <= walked, walked

        for name, seeded in two.items():
            prefix = f"/db/{name}"
            page = client.get(f"{prefix}/dead/").get_data(as_text=True)
            token = TOKEN.search(page).group(1)  # type: ignore[union-attr]
            asks = {
                "dead letters": client.post(f"{prefix}/dead/action", data={
                    "csrf_token": token, "action": "retry", "scope": "selected", "ids": str(seeded["dead"])}),
                "queue": client.post(f"{prefix}/queues/t1/jobs", data={
                    "csrf_token": token, "status": "ready", "action": "cancel", "ids": str(seeded["queued"])}),
                "queue pause": client.post(f"{prefix}/queues/t1/pause", data={"csrf_token": token}),
                "workflow": client.post(f"{prefix}/workflows/{seeded['workflow']}/cancel-rest",
                                        data={"csrf_token": token}),
            }
            for what, response in asks.items():
                body = response.get_data(as_text=True)
                assert response.status_code == 200 and 'role="alertdialog"' in body, (what, response.status_code)
                assert _confirmation_named(body, name), (name, what)
    finally:
        for console in app.extensions[CONSOLES].values():
            close_app(console)
        close_app(app)
