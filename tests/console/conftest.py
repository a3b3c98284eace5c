"""Console fixtures: an app on the test database with an admin and a read-only login."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from skiplock.webapp import create_app
from skiplock.webapp.db import close_app
from skiplock.webapp.settings import Account

ADMIN = ("ops-admin", "correct horse battery")
READONLY = ("ops-viewer", "read only please")
_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture
def make_app(db_url: str) -> Iterator[Any]:
    apps: list[Flask] = []

    def build(**config: Any) -> Flask:
        base = {"TESTING": True, "DATABASE_URL": db_url, "AUTH": True, "SECRET_KEY": "test-secret",
                "ACCOUNTS": [Account(ADMIN[0], "admin", password=ADMIN[1]),
                             Account(READONLY[0], "readonly", password=READONLY[1])]}
        app = create_app({**base, **config})
        apps.append(app)
        return app

    yield build
    for app in apps:
        close_app(app)


@pytest.fixture
def app(make_app: Any) -> Flask:
    return make_app()


def csrf_token(client: FlaskClient, url: str = "/login") -> str:
    """The CSRF token the page at `url` carries for this client's session."""
    html = client.get(url).get_data(as_text=True)
    match = _TOKEN.search(html)
    assert match, f"no csrf token on {url}"
    return match.group(1)


def login(client: FlaskClient, user: str, password: str) -> None:
    """Log in through the form, as a browser does."""
    token = csrf_token(client)
    response = client.post("/login", data={"user": user, "password": password, "csrf_token": token, "next": "/"})
    assert response.status_code == 303, response.get_data(as_text=True)


class Session:
    """A logged-in test client that posts forms with the page's CSRF token."""

    def __init__(self, client: FlaskClient) -> None:
        self.client = client
        self.token = csrf_token(client, "/")

    def get(self, url: str, **kw: Any) -> Any:
        return self.client.get(url, **kw)

    def post(self, url: str, data: dict[str, Any] | None = None, **kw: Any) -> Any:
        return self.client.post(url, data={**(data or {}), "csrf_token": self.token}, **kw)


@pytest.fixture
def admin(app: Flask) -> Session:
    client = app.test_client()
    login(client, *ADMIN)
    return Session(client)


@pytest.fixture
def viewer(app: Flask) -> Session:
    client = app.test_client()
    login(client, *READONLY)
    return Session(client)
