"""The console mounted in FastAPI and Starlette apps (skiplock.webapp.integrations.asgi), behind the
host's own auth: a FastAPI dependency, or a Starlette session rule.

Driven in-process through httpx's ASGI transport; the dead job comes from a real worker.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import Depends, FastAPI, HTTPException, Request
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from skiplock.core.errors import ConfigError
from skiplock.webapp.db import close_app
from skiplock.webapp.integrations.asgi import console_app, fastapi_console
from tests.console.test_mount import make_dead_job
from tests.support.helpers import scalar

PREFIX = "/admin/jobs"
_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
# The host's users: name -> may act in the console.
USERS = {"alice": True, "bob": False}


def current_user(request: Request) -> str:
    """The FastAPI host's auth dependency: who the cookie says, or 401."""
    user = request.cookies.get("host_user", "")
    if user not in USERS:
        raise HTTPException(401, "log in to the host first")
    return user


def console_role(user: str = Depends(current_user)) -> tuple[str, str]:
    return ("admin" if USERS[user] else "readonly"), user


def run(scenario: Callable[[httpx.AsyncClient], Awaitable[None]], app: Any) -> None:
    async def main() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://host.test") as client:
            await scenario(client)

    asyncio.run(main())


def token(html: str) -> str:
    match = _TOKEN.search(html)
    assert match, "no CSRF token on the page"
    return match.group(1)


def test_fastapi_dependency_guards_the_console_and_admin_retries(db_url: str, conn: psycopg.Connection,
                                                                  spawn_worker: Any) -> None:
    job_id = make_dead_job(db_url, spawn_worker)
    host = FastAPI()
    mounted = fastapi_console(console_role, database_url=db_url, secret_key="host-secret")
    host.mount(PREFIX, mounted)

    async def scenario(client: httpx.AsyncClient) -> None:
        refused = await client.get(f"{PREFIX}/dead/")
        assert refused.status_code == 401 and refused.json() == {"detail": "log in to the host first"}

        client.cookies.set("host_user", "bob")
        page = await client.get(f"{PREFIX}/jobs/{job_id}")
        assert page.status_code == 200 and "planned permanent failure" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        # the console's own cookie, scoped to the mount: the host's cookies are untouched
        assert "skiplock_console=" in page.headers["set-cookie"] and f"Path={PREFIX}" in page.headers["set-cookie"]
        read_only = await client.post(f"{PREFIX}/jobs/{job_id}/retry", data={"csrf_token": token(page.text)})
        assert read_only.status_code == 403

        client.cookies.set("host_user", "alice")
        page = await client.get(f"{PREFIX}/jobs/{job_id}")
        assert f'action="{PREFIX}/jobs/{job_id}/retry"' in page.text and f'href="{PREFIX}/static/' in page.text
        assert (await client.post(f"{PREFIX}/jobs/{job_id}/retry")).status_code == 400  # no CSRF token
        done = await client.post(f"{PREFIX}/jobs/{job_id}/retry",
                                 data={"csrf_token": token(page.text), "confirm": "yes"})
        assert done.status_code == 303 and done.headers["location"].startswith(f"{PREFIX}/jobs/{job_id}")
        polls = re.findall(r'hx-get="([^"]+)"', (await client.get(f"{PREFIX}/")).text)
        assert polls and all(p.startswith(f"{PREFIX}/") for p in polls)
        fragment = await client.get(polls[0], headers={"HX-Request": "true"})
        assert fragment.status_code == 200 and "<html" not in fragment.text

    try:
        run(scenario, host)
    finally:
        close_app(mounted.state.console)
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)) == "queued"
    assert conn.execute("SELECT actor, role, action, count FROM audit_log").fetchall() == \
        [("alice", "admin", "retry", 1)]


def test_starlette_session_rule_with_a_login_redirect(db_url: str, conn: psycopg.Connection,
                                                      spawn_worker: Any) -> None:
    job_id = make_dead_job(db_url, spawn_worker)

    async def who_may_see_jobs(request: Any) -> Any:  # an async rule, reading the host's session
        user = request.session.get("user")
        if user is None:
            return RedirectResponse(f"/login?next={request.url.path}", 303)
        return ("admin" if USERS.get(user) else "readonly"), user

    async def login(request: Any) -> Response:
        request.session["user"] = request.query_params["user"]
        return PlainTextResponse("logged in")

    console = console_app(who_may_see_jobs, database_url=db_url, secret_key="host-secret")
    host = Starlette(routes=[Route("/login", login), Mount(PREFIX, app=console)],
                     middleware=[Middleware(SessionMiddleware, secret_key="host-secret")])

    async def scenario(client: httpx.AsyncClient) -> None:
        anonymous = await client.get(f"{PREFIX}/dead/")
        assert anonymous.status_code == 303 and anonymous.headers["location"] == f"/login?next={PREFIX}/dead/"
        await client.get("/login?user=alice")
        page = await client.get(f"{PREFIX}/dead/")
        assert page.status_code == 200 and f"{PREFIX}/jobs/{job_id}" in page.text
        confirm = await client.post(f"{PREFIX}/dead/action", data={"action": "purge", "scope": "matching",
                                                                   "csrf_token": token(page.text)})
        assert confirm.status_code == 200 and "1 job" in confirm.text  # the confirmation states the count
        as_of = re.search(r'name="as_of" value="(\d+)"', confirm.text)
        assert as_of
        done = await client.post(f"{PREFIX}/dead/action", data={"action": "purge", "scope": "matching",
                                                                "confirm": "yes", "as_of": as_of.group(1),
                                                                "csrf_token": token(page.text)})
        assert done.status_code == 303 and done.headers["location"].startswith(f"{PREFIX}/dead/")

    try:
        run(scenario, host)
    finally:
        close_app(console.console)  # type: ignore[attr-defined]
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", (job_id,)) == 0
    assert conn.execute("SELECT actor, action, count FROM audit_log").fetchall() == \
        [("alice", "purge all matching", 1)]


def test_bad_rules_are_refused(db_url: str) -> None:
    with pytest.raises(ConfigError, match="authorize"):
        console_app("yes", database_url=db_url)  # type: ignore[arg-type]
    console = console_app(lambda request: ("root", "eve", "extra"), database_url=db_url, secret_key="k")
    host = Starlette(routes=[Mount(PREFIX, app=console)])

    async def scenario(client: httpx.AsyncClient) -> None:
        with pytest.raises(ConfigError, match="expected 'admin', 'readonly'"):
            await client.get(f"{PREFIX}/")

    try:
        run(scenario, host)
    finally:
        close_app(console.console)  # type: ignore[attr-defined]


def test_a_client_cannot_claim_an_identity(db_url: str) -> None:
    """The host's answer travels in the ASGI scope / WSGI environ, never in anything a client sends."""
    console = console_app(lambda request: None, database_url=db_url, secret_key="k")
    host = Starlette(routes=[Mount(PREFIX, app=console)])

    async def scenario(client: httpx.AsyncClient) -> None:
        forged = {"skiplock.identity": "admin", "skiplock-identity": "admin", "X-Skiplock-Identity": "admin"}
        assert (await client.get(f"{PREFIX}/", headers=forged)).status_code == 403
        assert (await client.get(f"{PREFIX}/?skiplock.identity=admin")).status_code == 403

    try:
        run(scenario, host)
    finally:
        close_app(console.console)  # type: ignore[attr-defined]


def test_the_hosts_dependency_overrides_reach_the_console(db_url: str, conn: psycopg.Connection) -> None:
    """A host's test that overrides its auth dependency logs in to the mounted console too (host=app)."""
    host = FastAPI()
    mounted = fastapi_console(console_role, database_url=db_url, secret_key="k", host=host)
    host.mount(PREFIX, mounted)
    host.dependency_overrides[current_user] = lambda: "bob"  # set after mounting, as a test would

    async def scenario(client: httpx.AsyncClient) -> None:
        page = await client.get(f"{PREFIX}/")  # no cookie: only the override can let this in
        assert page.status_code == 200 and "bob" in page.text and "readonly" in page.text.lower()

    try:
        run(scenario, host)
    finally:
        close_app(mounted.state.console)
