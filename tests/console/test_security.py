"""Console security: every route, found from the app's URL map, fed hostile input.

Routes are enumerated from `app.url_map` and the parameters each view reads are found in the
webapp sources, so a route or a parameter added later is attacked without editing this file.
Each hostile request must get a 4xx, a redirect, or a page with the input escaped; never a 5xx;
and the database must be unchanged (tables fingerprinted before and after). Auth and CSRF are
checked on every state-changing route.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from flask import Flask

from skiplock.webapp.auth import PUBLIC_ENDPOINTS, ROLE_FREE_POSTS
from tests.console.conftest import ADMIN, READONLY, csrf_token, login
from tests.support.factory import make_job

WEBAPP = Path(__file__).resolve().parents[2] / "webapp"
SAFE = {"GET", "HEAD", "OPTIONS"}

SQLI = ["' OR '1'='1", "1; DROP TABLE jobs; --", "1 OR 1=1", "'); DELETE FROM jobs; --", "%' OR 1=1 --",
        "1' UNION SELECT payload FROM jobs --", "\\", "-1", "0x10", "1e999", "99999999999999999999999"]
TRAVERSAL = ["../../../../etc/passwd", "..%2f..%2f..%2fetc%2fpasswd", "....//....//etc/passwd", "/etc/passwd",
             "..\\..\\windows\\win.ini", "%2e%2e/%2e%2e/etc/passwd"]
XSS = ["<script>alert(1)</script>", "\"><img src=x onerror=alert(1)>", "javascript:alert(1)", "{{7*7}}",
       "</textarea><svg onload=alert(1)>"]
ODD = ["\x00", "%00", "\u202e\u0000x", "ž🙂", " ", ""]
HOSTILE = SQLI + TRAVERSAL + XSS + ODD
# Raw markers that must never come back unescaped in a response body.
RAW_MARKERS = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<svg onload=alert(1)>"]
HUGE = "A" * 100_000


def view_params() -> list[str]:
    """Every query-string or form parameter a view reads (from the webapp sources)."""
    names: set[str] = set()
    pattern = re.compile(r"""(?:\barg|request\.(?:form|values|args)\.(?:get|getlist))\(\s*["'](\w+)["']""")
    for path in WEBAPP.rglob("*.py"):
        names.update(pattern.findall(path.read_text()))
    return sorted(names)


def fingerprint(conn: psycopg.Connection, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """md5 of every public table's rows (in a stable order), so any change shows."""
    tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                                         "ORDER BY 1").fetchall() if r[0] not in skip]
    out = {}
    for table in tables:
        row = conn.execute(f'SELECT md5(coalesce(string_agg(t::text, \'|\' ORDER BY t::text), \'\')) '
                           f'FROM "{table}" t').fetchone()
        assert row is not None  # an aggregate always returns its one row
        out[table] = row[0]
    return out


def routes(app: Flask) -> list[tuple[str, str, list[str], set[str]]]:
    """(rule, endpoint, arguments, methods) for every route except static files."""
    found = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        found.append((rule.rule, rule.endpoint, sorted(rule.arguments), set(rule.methods or ()) - {"HEAD", "OPTIONS"}))
    return found


def build(rule: str, values: dict[str, str]) -> str:
    """The URL of `rule` with each <converter:arg> replaced by its (quoted) value."""
    def sub(match: re.Match[str]) -> str:
        return quote(values[match.group(1)], safe="")

    return re.sub(r"<(?:[a-z]+:)?(\w+)>", sub, rule)


def state_changing(app: Flask) -> list[tuple[str, str, list[str], set[str]]]:
    return [r for r in routes(app) if r[3] - SAFE]


def defaults(job: int) -> dict[str, str]:
    """Plausible values for path arguments, so the request reaches the view."""
    return {"job_id": str(job), "name": "t1", "action": "purge", "filename": "console.css", "batch_id": "1",
            "worker_id": "w-test", "what": "quiet"}


def assert_safe(response: Any) -> None:
    assert response.status_code < 500, response.get_data(as_text=True)[:500]
    body = response.get_data(as_text=True)
    if response.mimetype == "text/plain":
        # Prometheus exposition (/metrics) carries label values verbatim by design; it is safe because
        # a browser never renders it as HTML: plain-text type and no content sniffing
        assert response.headers.get("X-Content-Type-Options") == "nosniff"
        return
    for marker in RAW_MARKERS:
        assert marker not in body
    assert "root:x:0:0" not in body


@pytest.fixture
def victim(conn) -> dict[str, int]:
    """Jobs in every state, so an injection that 'matches everything' would visibly change rows."""
    return {s: make_job(conn, "t1", s, last_error="boom") for s in ("queued", "running", "dead", "failed")}


# ---- auth and CSRF on every state-changing route -----------------------------------------------


def test_the_url_map_has_the_routes_we_expect_to_attack(app):
    endpoints = {r[1] for r in state_changing(app)}
    assert {"jobs.act", "dead.action", "queues.pause", "running.release"} <= endpoints


def test_every_state_changing_route_needs_login_role_and_csrf(app, conn, victim):
    before = fingerprint(conn)
    anonymous = app.test_client()
    anon_token = csrf_token(anonymous)
    viewer = app.test_client()
    login(viewer, *READONLY)
    viewer_token = csrf_token(viewer, "/")
    admin = app.test_client()
    login(admin, *ADMIN)
    checked = 0
    for rule, endpoint, _args, methods in state_changing(app):
        url = build(rule, defaults(victim["dead"]))
        form = {"one": str(victim["dead"]), "ids": str(victim["dead"]), "action": "purge", "scope": "all",
                "confirm": "yes"}
        for method in methods - SAFE:
            if endpoint in PUBLIC_ENDPOINTS or endpoint in ROLE_FREE_POSTS:
                # login/logout: no role needed, but a token is
                assert admin.open(url, method=method, data={}).status_code == 400, url
                continue
            assert anonymous.open(url, method=method, data={**form, "csrf_token": anon_token}).status_code == 401, url
            assert viewer.open(url, method=method, data={**form, "csrf_token": viewer_token}).status_code == 403, url
            assert admin.open(url, method=method, data=form).status_code == 400, url  # no token
            assert admin.open(url, method=method, data={**form, "csrf_token": "forged"}).status_code == 400, url
            checked += 1
    assert checked >= 6
    assert fingerprint(conn) == before


def test_every_page_needs_login(app, victim):
    client = app.test_client()
    for rule, endpoint, _args, methods in routes(app):
        if "GET" in methods and endpoint not in PUBLIC_ENDPOINTS:
            assert client.get(build(rule, defaults(victim["dead"]))).status_code == 401, rule


# ---- hostile input on every route ---------------------------------------------------------------

# Tables an accepted action may legitimately change: a paused queue, and the audit row every action
# (even one that changed no job) writes. Jobs and everything else must stay exactly as they were.
AUDITED = ("paused_queues", "audit_log")


def test_hostile_path_arguments_on_every_route(app, conn, victim):
    admin = app.test_client()
    login(admin, *ADMIN)
    token = csrf_token(admin, "/")
    before = fingerprint(conn, skip=AUDITED)
    for rule, _endpoint, args, methods in routes(app):
        for arg in args:
            for evil in [*HOSTILE, HUGE]:
                url = build(rule, {**defaults(victim["dead"]), arg: evil})
                for method in methods:
                    data = {"csrf_token": token} if method not in SAFE else None
                    assert_safe(admin.open(url, method=method, data=data))
    # a queue really may be named "'; DROP TABLE jobs; --" and be paused: that is data, not SQL.
    # Everything else, and above all every job, is exactly as it was.
    assert fingerprint(conn, skip=AUDITED) == before


@pytest.mark.slow  # 8-25 s each (fuzzing, a second cluster, a subprocess suite): the full run, not the edit-test loop
def test_hostile_query_and_form_values_on_every_route(app, conn, victim):
    admin = app.test_client()
    login(admin, *ADMIN)
    token = csrf_token(admin, "/")
    params = view_params()
    assert {"q", "status", "after", "one", "ids"} <= set(params)
    before = fingerprint(conn, skip=AUDITED)
    for rule, endpoint, _args, methods in routes(app):
        # the path names no real job, so any change could only come from the hostile values
        url = build(rule, {**defaults(victim["dead"]), "job_id": "999999"})
        for evil in [*HOSTILE, HUGE]:
            values = {p: evil for p in params if p not in ("user", "password")}
            for method in methods:
                if method in SAFE:
                    assert_safe(admin.get(url, query_string=values))
                elif endpoint not in ("auth.logout", "auth.login"):
                    assert_safe(admin.open(url, method=method, data={**values, "csrf_token": token}))
                    assert fingerprint(conn, skip=AUDITED) == before, (url, evil[:40])
    assert fingerprint(conn, skip=AUDITED) == before


def test_oversized_query_string_on_every_page(app, conn, victim):
    admin = app.test_client()
    login(admin, *ADMIN)
    before = fingerprint(conn)
    for rule, endpoint, _args, methods in routes(app):
        if "GET" in methods and endpoint != "auth.login":
            url = build(rule, defaults(victim["dead"]))
            assert_safe(admin.get(f"{url}?{'x' * 200_000}=1&q={HUGE}&{'&'.join(f'k{i}=v' for i in range(2000))}"))
    assert fingerprint(conn) == before


@pytest.mark.parametrize("path", TRAVERSAL)
def test_static_files_cannot_escape_their_folder(app, path):
    response = app.test_client().get(f"/static/{path}")
    assert 400 <= response.status_code < 500  # 401: a path outside /static/ is just an unknown page
    assert b"root:x:0:0" not in response.data


def test_stored_hostile_values_are_escaped_on_every_page(app, conn):
    evil_queue = "<script>alert(1)</script>"
    job = make_job(conn, evil_queue, "dead", payload={"html": XSS[0], "img": XSS[1], "svg": XSS[4]},
                   last_error=f"{XSS[1]}\nTraceback: {XSS[0]}", unique_key=XSS[4])
    running = make_job(conn, "t1", "running", worker_id=XSS[1], payload={"k": XSS[0]})
    admin = app.test_client()
    login(admin, *ADMIN)
    pages = 0
    for rule, _endpoint, _args, methods in routes(app):
        if "GET" not in methods:
            continue
        for values in ({"job_id": str(job), "name": evil_queue}, {"job_id": str(running), "name": "t1"}):
            for query in ({}, {"queue": evil_queue}, {"status": "dead", "queue": evil_queue}):
                url = build(rule, {**defaults(job), **values})
                response = admin.get(url, query_string=query)
                assert_safe(response)
                pages += response.status_code == 200
    assert pages >= 10
    detail = admin.get(f"/jobs/{job}").get_data(as_text=True)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail or "\\u003cscript\\u003e" in detail
