"""HTTP Basic is throttled like the login form: the same counter per user name and client address (the
forwarded one behind a proxy), 429 with Retry-After during the pair's wait, and every wait in the audit trail."""

from __future__ import annotations

import base64
from typing import Any

import psycopg

from tests.console.conftest import ADMIN, READONLY


def _basic(client: Any, user: str, password: str, addr: str = "10.0.0.1", forwarded: str | None = None) -> Any:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    headers = {"Authorization": f"Basic {token}"}
    if forwarded:
        headers["X-Forwarded-For"] = forwarded
    return client.get("/workers/", headers=headers, environ_base={"REMOTE_ADDR": addr})


def test_wrong_basic_passwords_slow_the_pair_and_are_audited(make_app: Any, db_url: str) -> None:
    app = make_app(LOGIN_MAX_FAILURES=5, LOGIN_LOCKOUT_SECONDS=600)
    client = app.test_client()
    answers = [_basic(client, ADMIN[0], f"guess-{i}", "10.0.0.1").status_code for i in range(5)]
    assert answers == [401] * 5, answers
    # the same account from another address, and another account from this one, are not affected
    assert _basic(client, ADMIN[0], ADMIN[1], "10.0.0.99").status_code == 200
    assert _basic(client, READONLY[0], READONLY[1], "10.0.0.1").status_code == 200
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT actor, detail->>'address', detail->>'via', (detail->>'seconds')::int "
                            "FROM audit_log WHERE action = 'login throttled'").fetchall()
    assert rows == [(ADMIN[0], "10.0.0.1", "basic", 1)]


def test_behind_a_proxy_the_pair_is_the_forwarded_address(make_app: Any, db_url: str) -> None:
    app = make_app(LOGIN_MAX_FAILURES=3, LOGIN_LOCKOUT_SECONDS=600, BEHIND_PROXY=True)
    client = app.test_client()
    # every request comes from the proxy (127.0.0.1); the client is in X-Forwarded-For
    for _ in range(3):
        assert _basic(client, ADMIN[0], "guess", "127.0.0.1", forwarded="203.0.113.7").status_code == 401
    assert _basic(client, ADMIN[0], ADMIN[1], "127.0.0.1", forwarded="203.0.113.8").status_code == 200
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT detail->>'address' FROM audit_log WHERE action = 'login throttled'"
                            ).fetchall() == [("203.0.113.7",)]


def test_a_good_basic_login_clears_the_failures(make_app: Any) -> None:
    app = make_app(LOGIN_MAX_FAILURES=3)
    client = app.test_client()
    for _ in range(2):
        assert _basic(client, ADMIN[0], "wrong").status_code == 401
    assert _basic(client, ADMIN[0], ADMIN[1]).status_code == 200
    for _ in range(2):  # two more failures do not reach the limit of three
        assert _basic(client, ADMIN[0], "wrong").status_code == 401
    assert _basic(client, ADMIN[0], ADMIN[1]).status_code == 200
