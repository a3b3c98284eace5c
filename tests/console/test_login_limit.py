"""Failed logins slow the (user name, client address) pair with a growing wait, across app processes; no
other account on the address, and no other address of the account, is slowed."""

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


def _throttles(db_url: str, user: str) -> list[tuple[int, str]]:
    with psycopg.connect(db_url) as conn:
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT (detail->>'seconds')::int, detail->>'address' FROM audit_log WHERE action = 'login throttled' "
            "AND actor = %s ORDER BY id", (user,)).fetchall()]


def test_past_the_limit_the_pair_waits_and_no_other_account_or_address_does(make_app: Any, db_url: str) -> None:
    app = make_app(LOGIN_MAX_FAILURES=3, LOGIN_LOCKOUT_SECONDS=600)
    client = app.test_client()
    answers = [_try(client, ADMIN[0], "wrong", "10.0.0.1") for _ in range(3)]
    assert [a.status_code for a in answers] == [401] * 3
    assert "Wait 1 seconds" in answers[-1].get_data(as_text=True)  # the third failure: the pair waits
    assert _throttles(db_url, ADMIN[0]) == [(1, "10.0.0.1")]
    # another account on that address, and this account from another address, are not slowed at all
    assert _try(client, READONLY[0], READONLY[1], "10.0.0.1").status_code == 303
    assert _try(client, ADMIN[0], ADMIN[1], "10.0.0.2").status_code == 303
    # and the right password from the pair itself works once its short wait is over
    wait_for(lambda: _try(client, ADMIN[0], ADMIN[1], "10.0.0.1").status_code == 303, timeout=30,
             message="the pair's one-second wait to end")


def test_each_failure_past_the_limit_doubles_the_wait_and_a_try_during_it_is_refused(make_app: Any,
                                                                                      db_url: str) -> None:
    app = make_app(LOGIN_MAX_FAILURES=1, LOGIN_LOCKOUT_SECONDS=600)
    client = app.test_client()
    for expected in ([(1, "10.0.0.1")], [(1, "10.0.0.1"), (2, "10.0.0.1")],
                     [(1, "10.0.0.1"), (2, "10.0.0.1"), (4, "10.0.0.1")]):
        # a try while the pair waits is refused (429, not counted); the first one after it fails and doubles
        wait_for(lambda: _try(client, ADMIN[0], "guess").status_code == 401, timeout=30, message="the wait to end")
        assert _throttles(db_url, ADMIN[0]) == expected
    refused = _try(client, ADMIN[0], ADMIN[1])  # the right password during a 4 s wait
    if refused.status_code == 429:  # (a slow machine may already be past it)
        assert 1 <= int(refused.headers["Retry-After"]) <= 4
        assert "the right password then logs you in" in refused.get_data(as_text=True)
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT failures FROM login_failures").fetchone() == (3,)  # refused tries not counted


def test_names_tried_from_an_address_do_not_lock_that_address(make_app: Any) -> None:
    app = make_app(LOGIN_MAX_FAILURES=3, LOGIN_LOCKOUT_SECONDS=600)
    client = app.test_client()
    for name in ("root", "admin", "postgres\x00<script>"):
        for _ in range(3):
            assert _try(client, name, "guess", "10.9.9.9").status_code == 401
    assert _try(client, READONLY[0], READONLY[1], "10.9.9.9").status_code == 303


def test_the_count_is_shared_between_processes(make_app: Any) -> None:
    # two apps = two gunicorn workers with their own memory; only the database is shared
    first, second = make_app(LOGIN_MAX_FAILURES=2), make_app(LOGIN_MAX_FAILURES=2)
    assert _try(first.test_client(), ADMIN[0], "wrong", "10.1.0.1").status_code == 401
    second_try = _try(second.test_client(), ADMIN[0], "wrong", "10.1.0.1")
    assert second_try.status_code == 401 and "Wait 1 seconds" in second_try.get_data(as_text=True)


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


def test_the_wait_ends_by_itself(make_app: Any) -> None:
    app = make_app(LOGIN_MAX_FAILURES=1, LOGIN_LOCKOUT_SECONDS=1)
    client = app.test_client()
    assert _try(client, ADMIN[0], "wrong").status_code == 401
    wait_for(lambda: _try(client, ADMIN[0], ADMIN[1]).status_code == 303, timeout=10, message="the wait to end")
