"""Auth, roles and CSRF: enforced for every route by one before_request."""

from __future__ import annotations

import logging
import re

import pytest
from flask import Blueprint
from werkzeug.security import generate_password_hash

from skiplock.core.errors import ConfigError
from skiplock.webapp import create_app
from skiplock.webapp.settings import Account, web_config
from tests.console.conftest import ADMIN, READONLY, csrf_token, login
from tests.support.factory import make_job, status_of

GET_ROUTES = ["/", "/queues/t1", "/running/", "/dead/", "/jobs/1", "/workers/", "/recurring/",
              "/prefs?refresh=2", "/no-such-page"]
POST_ROUTES = ["/queues/t1/pause", "/queues/t1/resume", "/running/release", "/dead/action", "/jobs/1/retry",
               "/jobs/1/purge", "/jobs/1/cancel", "/jobs/1/run-now", "/jobs/1/release", "/recurring/x/pause"]


@pytest.mark.parametrize("url", GET_ROUTES)
def test_every_page_needs_a_login(app, url):
    response = app.test_client().get(url)
    assert response.status_code == 401
    assert b'action="/login"' in response.data  # the login form, not a bare error


@pytest.mark.parametrize("url", POST_ROUTES)
def test_every_action_needs_a_login(app, conn, url):
    job = make_job(conn, "t1", "dead")
    client = app.test_client()
    token = csrf_token(client)
    response = client.post(url.replace("/1/", f"/{job}/"), data={"csrf_token": token, "one": str(job),
                                                                   "action": "purge"})
    assert response.status_code == 401
    assert status_of(conn, job) == "dead"


def test_public_endpoints_need_no_login(app):
    client = app.test_client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/static/console.css").status_code == 200
    assert client.get("/login").status_code == 200


def test_htmx_poll_without_session_redirects_to_login(app):
    response = app.test_client().get("/", headers={"HX-Request": "true"})
    assert response.status_code == 401
    assert response.headers["HX-Redirect"].startswith("/login")


def test_wrong_password_is_refused_and_logged(app, caplog):
    client = app.test_client()
    token = csrf_token(client)
    with caplog.at_level(logging.WARNING, logger="skiplock.console.auth"):
        response = client.post("/login", data={"user": ADMIN[0], "password": "nope", "csrf_token": token})
    assert response.status_code == 401
    assert b"Wrong user or password" in response.data
    assert client.get("/").status_code == 401
    assert any("failed login" in r.getMessage() for r in caplog.records)


def test_login_needs_csrf(app):
    response = app.test_client().post("/login", data={"user": ADMIN[0], "password": ADMIN[1]})
    assert response.status_code == 400


def test_login_then_logout(app):
    client = app.test_client()
    login(client, *ADMIN)
    page = client.get("/")
    assert page.status_code == 200 and ADMIN[0].encode() in page.data
    token = csrf_token(client, "/")
    assert client.post("/logout", data={"csrf_token": token}).status_code == 303
    assert client.get("/").status_code == 401


@pytest.mark.parametrize("target", ["//evil.example/x", "/\\evil.example", "https://evil.example/", "/\tx"])
def test_redirects_stay_on_this_site(app, target):
    client = app.test_client()
    token = csrf_token(client)
    response = client.post("/login", data={"user": ADMIN[0], "password": ADMIN[1], "csrf_token": token,
                                           "next": target})
    assert response.status_code == 303 and response.headers["Location"] == "/"
    assert client.get("/prefs", query_string={"refresh": "2", "next": target}).headers["Location"] == "/"


def test_password_hash_and_basic_auth(make_app):
    app = make_app(ACCOUNTS=[Account("hashed", "admin", password_hash=generate_password_hash("s3cret"))])
    client = app.test_client()
    assert client.get("/", auth=("hashed", "s3cret")).status_code == 200
    assert client.get("/", auth=("hashed", "wrong")).status_code == 401
    login(client, "hashed", "s3cret")
    assert client.get("/workers/").status_code == 200


def test_post_without_csrf_token_is_rejected(admin, conn):
    job = make_job(conn, "t1", "dead")
    for url in (f"/jobs/{job}/purge", "/queues/t1/pause"):
        assert admin.client.post(url, data={}).status_code == 400
        assert admin.client.post(url, data={"csrf_token": "forged"}).status_code == 400
    assert status_of(conn, job) == "dead"
    assert conn.execute("SELECT count(*) FROM paused_queues").fetchone()[0] == 0


def test_htmx_sends_the_token_in_a_header(admin, conn):
    job = make_job(conn, "t1", "dead")
    response = admin.client.post(f"/jobs/{job}/retry", data={"confirm": "yes"},
                                 headers={"X-CSRFToken": admin.token, "HX-Request": "true"})
    assert response.status_code == 303
    assert status_of(conn, job) == "queued"


def test_layout_gives_htmx_the_token(admin, conn):
    html = admin.get("/").get_data(as_text=True)
    # the signed token carries a timestamp, so it is not byte-equal across requests; it must work
    token = re.search(r"""hx-headers='\{"X-CSRFToken": "([^"]+)"\}'""", html)
    assert token, html[:500]
    job = make_job(conn, "t1", "dead")
    value = token.group(1)
    done = admin.client.post(f"/jobs/{job}/retry", data={"confirm": "yes"}, headers={"X-CSRFToken": value})
    assert done.status_code == 303


@pytest.mark.parametrize("url", POST_ROUTES)
def test_read_only_role_gets_403_on_actions(viewer, conn, url):
    job = make_job(conn, "t1", "dead")
    response = viewer.post(url.replace("/1/", f"/{job}/"), {"one": str(job), "action": "purge"})
    assert response.status_code == 403
    assert status_of(conn, job) == "dead"
    assert conn.execute("SELECT count(*) FROM paused_queues").fetchone()[0] == 0


def test_read_only_role_sees_every_page(viewer, conn):
    job = make_job(conn, "t1", "dead", last_error="boom")
    for url in ["/", "/queues/t1", "/running/", "/dead/", f"/jobs/{job}", "/workers/", "/recurring/"]:
        response = viewer.get(url)
        assert response.status_code == 200, url
    # buttons are shown disabled for a read-only login
    assert b'disabled title="read-only login"' in viewer.get(f"/jobs/{job}").data


def test_refuses_to_start_without_credentials(db_url):
    with pytest.raises(ConfigError) as info:
        create_app({"DATABASE_URL": db_url, "AUTH": True, "ACCOUNTS": []})
    assert "SKIPLOCK_WEB_USER" in str(info.value) and "SKIPLOCK_WEB_AUTH=off" in str(info.value)


def test_env_parsing(db_url):
    env = {"DATABASE_URL": db_url, "SKIPLOCK_WEB_USER": "a", "SKIPLOCK_WEB_PASSWORD_HASH": "pbkdf2:x",
           "SKIPLOCK_WEB_READONLY_USER": "b", "SKIPLOCK_WEB_READONLY_PASSWORD": "p"}
    config = web_config(env)
    assert config["AUTH"] is True
    assert [(a.user, a.role) for a in config["ACCOUNTS"]] == [("a", "admin"), ("b", "readonly")]
    with pytest.raises(ConfigError, match="SKIPLOCK_WEB_PASSWORD"):
        web_config({"DATABASE_URL": db_url, "SKIPLOCK_WEB_USER": "a"})
    with pytest.raises(ConfigError, match="on or off"):
        web_config({"DATABASE_URL": db_url, "SKIPLOCK_WEB_AUTH": "maybe"})


def test_auth_off_shows_a_warning_on_every_page(make_app, conn):
    app = make_app(AUTH=False, ACCOUNTS=[])
    client = app.test_client()
    for url in ["/", "/dead/", "/workers/"]:
        response = client.get(url)
        assert response.status_code == 200
        assert b"Authentication is OFF" in response.data
    job = make_job(conn, "t1", "dead")
    # CSRF still applies with auth off
    assert client.post(f"/jobs/{job}/retry").status_code == 400
    token = csrf_token(client, "/")
    assert client.post(f"/jobs/{job}/retry", data={"csrf_token": token, "confirm": "yes"}).status_code == 303
    assert status_of(conn, job) == "queued"


def test_metrics_endpoint_is_public_but_honours_its_token(make_app):
    app = make_app(METRICS_TOKEN="scrape-me")
    if "ops" not in app.blueprints:  # before the ops branch is merged: a stand-in with the same endpoint
        stand_in = Blueprint("ops", __name__)
        stand_in.add_url_rule("/metrics", "metrics", lambda: "metrics\n")
        app.register_blueprint(stand_in)
    client = app.test_client()
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer scrape-me"}).status_code == 200


def test_security_headers(admin):
    response = admin.get("/")
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Cache-Control"] == "no-store"


def test_readonly_and_admin_names_must_differ(db_url):
    same = [Account("x", "admin", password="a"), Account("x", "readonly", password="b")]
    with pytest.raises(ConfigError, match="must differ"):
        create_app({"DATABASE_URL": db_url, "ACCOUNTS": same})


def test_viewer_credentials_do_not_grant_admin(app):
    client = app.test_client()
    assert client.get("/", auth=READONLY).status_code == 200
    assert client.post("/queues/t1/pause", auth=READONLY).status_code == 403
