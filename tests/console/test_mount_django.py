"""The console mounted in a Django project with one include() (skiplock.webapp.integrations.django),
behind Django's login: staff look, superusers and holders of a permission act, others are refused.

The project is examples/django_project under gunicorn; the dead job comes from a real worker.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.django_host import PREFIX, PROJECT, django_shop, make_dead_job_in, prepare, project_env
from tests.support.helpers import scalar

_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture
def shop(fresh_db_url: str, tmp_path: Path) -> Iterator[str]:
    with django_shop(fresh_db_url, tmp_path / "gunicorn.log") as url:
        yield url


def logged_in(base: str, user: str) -> httpx.Client:
    """A client logged in through the project's own login page (Django's CSRF token included)."""
    client = httpx.Client(base_url=base, follow_redirects=False, timeout=30)
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token
    done = client.post("/accounts/login/", data={"username": user, "password": f"{user}-pw", "next": f"{PREFIX}/",
                                                 "csrfmiddlewaretoken": token.group(1)})
    assert done.status_code == 302 and done.headers["location"] == f"{PREFIX}/", done.text[:300]
    return client


def console_token(client: httpx.Client, path: str) -> str:
    match = _TOKEN.search(client.get(path).text)
    assert match, f"no CSRF token on {path}"
    return match.group(1)


@pytest.mark.slow
def test_django_login_decides_who_sees_and_who_acts(shop: str, fresh_db_url: str, spawn_worker: Any) -> None:
    job_id = make_dead_job_in(fresh_db_url, spawn_worker)
    with httpx.Client(base_url=shop, follow_redirects=False) as anonymous:
        sent = anonymous.get(f"{PREFIX}/dead/")
        assert sent.status_code == 302 and sent.headers["location"] == f"/accounts/login/?next={PREFIX}/dead/"
    carol = logged_in(shop, "carol")  # logged in, not staff
    assert carol.get(f"{PREFIX}/").status_code == 403

    bob = logged_in(shop, "bob")  # staff: read-only
    page = bob.get(f"{PREFIX}/dead/")
    assert page.status_code == 200 and f"{PREFIX}/jobs/{job_id}" in page.text
    token = console_token(bob, f"{PREFIX}/jobs/{job_id}")
    assert bob.post(f"{PREFIX}/jobs/{job_id}/retry", data={"csrf_token": token}).status_code == 403

    dave = logged_in(shop, "dave")  # staff with orders.operate_jobs: may act
    page = dave.get(f"{PREFIX}/jobs/{job_id}")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    cookie = page.headers["set-cookie"]
    assert "skiplock_console=" in cookie and f"Path={PREFIX}" in cookie and "HttpOnly" in cookie
    assert f'href="{PREFIX}/static/' in page.text and f'action="{PREFIX}/jobs/{job_id}/retry"' in page.text
    assert dave.post(f"{PREFIX}/jobs/{job_id}/retry").status_code == 400  # the console's CSRF token is required
    token = console_token(dave, f"{PREFIX}/jobs/{job_id}")
    done = dave.post(f"{PREFIX}/jobs/{job_id}/retry", data={"csrf_token": token, "confirm": "yes"})
    assert done.status_code == 303 and done.headers["location"].startswith(f"{PREFIX}/jobs/{job_id}")
    # htmx polls and static files are served under the prefix, and Django's own session is intact
    polls = re.findall(r'hx-get="([^"]+)"', dave.get(f"{PREFIX}/").text)
    assert polls and all(p.startswith(f"{PREFIX}/") for p in polls)
    fragment = dave.get(polls[0], headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and "<html" not in fragment.text
    static = dave.get(f"{PREFIX}/static/htmx-2.0.11.min.js")
    assert static.status_code == 200 and len(static.content) > 10_000
    admin_index = dave.get("/admin/")
    assert admin_index.status_code == 200  # still logged in to Django
    # the admin lists the console (add_admin_link), for those the console's rule lets in
    assert f'<a href="{PREFIX}/">Job queue</a>' in admin_index.text, admin_index.text[-3000:]

    with psycopg.connect(fresh_db_url, autocommit=True) as conn:
        assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)) == "queued"
        assert conn.execute("SELECT actor, role, action, count FROM audit_log").fetchall() == \
            [("dave", "admin", "retry", 1)]
    for client in (carol, bob, dave):
        client.close()


# Django's ASGI handler in place of gunicorn: the same view, with no WSGI environ to start from.
ASGI_VISIT = '''
import asyncio, re, httpx
from django.core.asgi import get_asgi_application

async def main():
    transport = httpx.ASGITransport(app=get_asgi_application())
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        print("anonymous", (await c.get("/jobs/")).status_code)
        page = await c.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        await c.post("/accounts/login/", data={"username": "alice", "password": "alice-pw",
                                               "csrfmiddlewaretoken": token, "next": "/jobs/"})
        page = await c.get("/jobs/dead/")
        print("page", page.status_code)
        form = {"action": "retry", "scope": "matching"}
        print("no token", (await c.post("/jobs/dead/action", data=form)).status_code)
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        confirm = await c.post("/jobs/dead/action", data={**form, "csrf_token": token})
        print("confirm", confirm.status_code, "1 job" in confirm.text)

asyncio.run(main())
'''


@pytest.mark.slow
def test_django_asgi_handler_serves_the_console_too(fresh_db_url: str, spawn_worker: Any) -> None:
    make_dead_job_in(fresh_db_url, spawn_worker)
    prepare(fresh_db_url)
    done = subprocess.run([sys.executable, "-c", ASGI_VISIT], cwd=PROJECT, env=project_env(fresh_db_url),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:4] == ["anonymous 302", "page 200", "no token 400", "confirm 200 True"]
