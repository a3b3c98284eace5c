"""One factory for the console: `create_app()` (the Procfile's gunicorn target) honours SKIPLOCK_DATABASES
as `skiplock web` does, and each database's pages name the database they act on."""

from __future__ import annotations

import base64

import psycopg
import pytest

from skiplock import enqueue_many
from skiplock.webapp import create_app
from skiplock.webapp.db import close_app
from skiplock.webapp.pages.databases import CONSOLES

LOGIN = {"Authorization": "Basic " + base64.b64encode(b"admin:pw").decode()}


@pytest.fixture
def two_databases(fresh_db_url: str, session_db: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    urls = {"orders": fresh_db_url, "billing": session_db}
    monkeypatch.setenv("SKIPLOCK_DATABASES", ",".join(f"{name}={url}" for name, url in urls.items()))
    monkeypatch.setenv("SKIPLOCK_WEB_USER", "admin")
    monkeypatch.setenv("SKIPLOCK_WEB_PASSWORD", "pw")
    with psycopg.connect(fresh_db_url, autocommit=True) as conn:
        enqueue_many([("factory_q", {"n": 1})], conn=conn)
    return urls


def test_create_app_serves_every_database_of_the_setting(two_databases: dict[str, str]) -> None:
    app = create_app()  # exactly what gunicorn 'skiplock.webapp:create_app()' calls
    try:
        assert set(app.extensions[CONSOLES]) == {"orders", "billing"}
        client = app.test_client()
        listing = client.get("/databases/", headers=LOGIN)
        assert listing.status_code == 200
        assert b"orders" in listing.data and b"billing" in listing.data
        for name in two_databases:
            page = client.get(f"/db/{name}/", headers=LOGIN)
            assert page.status_code == 200, page.data[:500]
            assert name.encode() in page.data
        orders = client.get("/db/orders/queues/factory_q/", headers=LOGIN)
        assert orders.status_code == 200 and b"orders" in orders.data
    finally:
        for console in app.extensions[CONSOLES].values():
            close_app(console)
        close_app(app)


def test_create_app_with_its_own_config_is_one_database(two_databases: dict[str, str]) -> None:
    app = create_app({"TESTING": True, "DATABASE_URL": two_databases["orders"]})  # mount() and tests build so
    try:
        assert CONSOLES not in app.extensions
    finally:
        close_app(app)
