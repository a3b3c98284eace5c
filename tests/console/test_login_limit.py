"""Failed logins lock out the user name and the client address for a while, across app processes."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.console.conftest import ADMIN, READONLY
from tests.support.helpers import wait_for


def _try(client: Any, user: str, password: str, addr: str = "10.0.0.1") -> Any:
    env = {"REMOTE_ADDR": addr}
    page = client.get("/login", environ_base=env).get_data(as_text=True)
    token = page.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    return client.post("/login", data={"user": user, "password": password, "csrf_token": token, "next": "/"},
                       environ_base=env)


def test_a_user_name_is_locked_after_the_limit_even_with_the_right_password(make_app: Any) -> None:
    app = make_app(LOGIN_MAX_FAILURES=3, LOGIN_LOCKOUT_SECONDS=600)
    client = app.test_client()
    assert [_try(client, ADMIN[0], "wrong", f"10.0.0.{i}").status_code for i in range(3)] == [401] * 3
    refused = _try(client, ADMIN[0], ADMIN[1], "10.0.0.9")
    assert refused.status_code == 429
    assert 590 <= int(refused.headers["Retry-After"]) <= 600
    assert "Too many failed logins" in refused.get_data(as_text=True)
    # the other account, from a clean address, is untouched
    assert _try(client, READONLY[0], READONLY[1], "10.0.0.20").status_code == 303


def test_an_address_is_locked_whatever_names_it_tries(make_app: Any) -> None:
    app = make_app(LOGIN_MAX_FAILURES=3, LOGIN_LOCKOUT_SECONDS=600)
    client = app.test_client()
    for name in ("root", "admin", "postgres\x00<script>"):
        assert _try(client, name, "guess", "10.9.9.9").status_code == 401
    assert _try(client, READONLY[0], READONLY[1], "10.9.9.9").status_code == 429
    assert _try(client, READONLY[0], READONLY[1], "10.9.9.10").status_code == 303


def test_the_count_is_shared_between_processes(make_app: Any) -> None:
    # two apps = two gunicorn workers with their own memory; only the database is shared
    first, second = make_app(LOGIN_MAX_FAILURES=2), make_app(LOGIN_MAX_FAILURES=2)
    assert _try(first.test_client(), ADMIN[0], "wrong", "10.1.0.1").status_code == 401
    assert _try(second.test_client(), ADMIN[0], "wrong", "10.1.0.2").status_code == 401
    assert _try(first.test_client(), ADMIN[0], ADMIN[1], "10.1.0.3").status_code == 429


def test_a_good_login_clears_the_failures(make_app: Any, db_url: str) -> None:
    app = make_app(LOGIN_MAX_FAILURES=3)
    client = app.test_client()
    for _ in range(2):
        assert _try(client, ADMIN[0], "wrong").status_code == 401
    assert _try(client, ADMIN[0], ADMIN[1]).status_code == 303
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM login_failures").fetchone() == (0,)
    for _ in range(2):  # two more failures do not reach the limit of three
        assert _try(client, ADMIN[0], "wrong").status_code == 401
    assert _try(client, ADMIN[0], ADMIN[1]).status_code == 303


def test_the_lockout_ends_by_itself(make_app: Any) -> None:
    app = make_app(LOGIN_MAX_FAILURES=1, LOGIN_LOCKOUT_SECONDS=1)
    client = app.test_client()
    assert _try(client, ADMIN[0], "wrong").status_code == 401
    assert _try(client, ADMIN[0], ADMIN[1]).status_code == 429
    wait_for(lambda: _try(client, ADMIN[0], ADMIN[1]).status_code == 303, timeout=10, message="lockout to end")
