"""Session hardening: idle expiry, Secure cookies over HTTPS (directly or behind a proxy), no framing."""

from __future__ import annotations

import time
from typing import Any

import pytest
from itsdangerous import TimestampSigner

from skiplock.core.errors import ConfigError
from skiplock.webapp.settings import web_config
from tests.console.conftest import ADMIN, login


def _clock_ahead(monkeypatch: pytest.MonkeyPatch, minutes: float) -> None:
    """Move the session signer's clock forward, as if the browser had been idle that long."""
    now = int(time.time() + minutes * 60)
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda self: now)


@pytest.mark.parametrize(("idle", "expected"), [(9, 200), (11, 401)])
def test_a_session_expires_after_the_idle_time(make_app: Any, monkeypatch: pytest.MonkeyPatch,
                                               idle: int, expected: int) -> None:
    app = make_app(SESSION_IDLE_MINUTES=10)
    client = app.test_client()
    login(client, *ADMIN)
    assert client.get("/").status_code == 200
    _clock_ahead(monkeypatch, idle)
    assert client.get("/").status_code == expected


def test_each_request_restarts_the_idle_clock(make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(SESSION_IDLE_MINUTES=10)
    client = app.test_client()
    login(client, *ADMIN)
    _clock_ahead(monkeypatch, 8)
    assert client.get("/").status_code == 200  # re-signs the cookie at minute 8
    _clock_ahead(monkeypatch, 16)
    assert client.get("/").status_code == 200  # 8 idle minutes since then, not 16


def test_a_poll_in_flight_at_logout_does_not_log_the_browser_back_in(make_app: Any) -> None:
    # The overview's loaders and polls (htmx GETs) may still be on their way when the operator logs out;
    # their responses must not put the old, logged-in cookie back in the browser.
    app = make_app()
    client = app.test_client()
    login(client, *ADMIN)
    logged_in = client.get_cookie("skiplock_console") or client.get_cookie("session")
    assert logged_in is not None
    poll = client.get("/", headers={"HX-Request": "true"})
    assert poll.status_code == 200
    assert "Set-Cookie" not in poll.headers
    # an operator's own page load still re-signs the cookie (the idle clock restarts)
    assert "Set-Cookie" in client.get("/").headers


def test_background_polls_do_not_keep_an_idle_session_alive(make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(SESSION_IDLE_MINUTES=10)
    client = app.test_client()
    login(client, *ADMIN)
    _clock_ahead(monkeypatch, 8)
    assert client.get("/", headers={"HX-Request": "true"}).status_code == 200
    _clock_ahead(monkeypatch, 11)
    assert client.get("/").status_code == 401  # 11 minutes since the operator's last own request


def _login_cookie(client: Any, **kw: Any) -> str:
    page = client.get("/login", **kw).get_data(as_text=True)
    token = page.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    response = client.post("/login", data={"user": ADMIN[0], "password": ADMIN[1], "csrf_token": token,
                                           "next": "/"}, **kw)
    assert response.status_code == 303
    return str(response.headers["Set-Cookie"])


def test_the_cookie_is_not_secure_over_plain_http(app: Any) -> None:
    assert "Secure" not in _login_cookie(app.test_client())


def test_the_cookie_is_same_site_lax_and_http_only(app: Any) -> None:
    # Lax: another site's form cannot post with the console's cookie (CSRF tokens are the other lock)
    cookie = _login_cookie(app.test_client())
    assert "SameSite=Lax" in cookie and "HttpOnly" in cookie


def test_the_cookie_is_secure_over_https(app: Any) -> None:
    # a browser sends a same-origin Referer, which Flask-WTF requires over HTTPS
    cookie = _login_cookie(app.test_client(), base_url="https://console.example",
                           headers={"Referer": "https://console.example/login"})
    assert "; Secure" in cookie and "HttpOnly" in cookie


def test_behind_a_proxy_forwarded_https_makes_the_cookie_secure(make_app: Any) -> None:
    app = make_app(BEHIND_PROXY=True)
    cookie = _login_cookie(app.test_client(), headers={"X-Forwarded-Proto": "https",
                                                                "Referer": "https://localhost/login"})
    assert "; Secure" in cookie


def test_without_the_proxy_setting_forwarded_headers_are_ignored(app: Any) -> None:
    # a client cannot claim HTTPS (or another address) by sending the header itself
    cookie = _login_cookie(app.test_client(), headers={"X-Forwarded-Proto": "https"})
    assert "Secure" not in cookie


@pytest.mark.parametrize("url", ["/login", "/"])
def test_framing_is_refused(app: Any, url: str) -> None:
    response = app.test_client().get(url)
    assert response.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]


def test_settings_are_read_and_bad_values_refused() -> None:
    env = {"DATABASE_URL": "postgresql://x/y", "SKIPLOCK_BEHIND_PROXY": "on", "SKIPLOCK_SESSION_IDLE_MINUTES": "15"}
    config = web_config(env)
    assert config["BEHIND_PROXY"] is True and config["SESSION_IDLE_MINUTES"] == 15
    assert web_config({"DATABASE_URL": "postgresql://x/y"})["SESSION_IDLE_MINUTES"] == 60
    with pytest.raises(ConfigError, match="SKIPLOCK_SESSION_IDLE_MINUTES"):
        web_config({**env, "SKIPLOCK_SESSION_IDLE_MINUTES": "-5"})
    with pytest.raises(ConfigError, match="SKIPLOCK_BEHIND_PROXY"):
        web_config({**env, "SKIPLOCK_BEHIND_PROXY": "maybe"})
