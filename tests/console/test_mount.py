"""The console mounted inside a host Flask app (skiplock.webapp.mount), driven by the host's login.

The dead job comes from a real worker running a handler that raises PermanentFailure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from flask import Flask

from skiplock import enqueue
from skiplock.core.errors import ConfigError
from skiplock.webapp import mount
from skiplock.webapp.db import close_app
from tests.support.helpers import scalar, wait_for
from tests.support.host_app import PREFIX, build_host

_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def make_dead_job(db_url: str, spawn_worker: Callable[..., Any]) -> int:
    """A dead job as a real worker leaves it: the handler raised PermanentFailure."""
    job_id = enqueue("t1", {"permanent": True})
    assert job_id is not None
    worker = spawn_worker(SKIPLOCK_QUEUES="t1")
    with psycopg.connect(db_url, autocommit=True) as conn:
        wait_for(lambda: scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)) == "dead",
                 message="the worker to kill the job")
    worker.terminate()
    return job_id


@pytest.fixture
def host(db_url: str) -> Iterator[Flask]:
    app = build_host(db_url)
    yield app
    close_app(app.extensions["skiplock_console"])


def test_host_users_get_their_roles_and_admin_retries(host: Flask, db_url: str, spawn_worker: Any) -> None:
    job_id = make_dead_job(db_url, spawn_worker)
    anon = host.test_client()
    assert anon.get("/").status_code == 200  # the host's own pages are untouched
    assert anon.get(f"{PREFIX}/").status_code == 403
    assert anon.get(f"{PREFIX}/dead/").status_code == 403

    viewer = host.test_client()
    viewer.get("/login?user=bob")
    page = viewer.get(f"{PREFIX}/dead/")
    assert page.status_code == 200 and f"{PREFIX}/jobs/{job_id}" in page.get_data(as_text=True)
    token = _TOKEN.search(viewer.get(f"{PREFIX}/jobs/{job_id}").get_data(as_text=True))
    assert token
    refused = viewer.post(f"{PREFIX}/jobs/{job_id}/retry", data={"csrf_token": token.group(1)})
    assert refused.status_code == 403

    admin = host.test_client()
    admin.get("/login?user=alice")
    html = admin.get(f"{PREFIX}/jobs/{job_id}").get_data(as_text=True)
    # every link, form and poll of the console carries the prefix
    assert f'href="{PREFIX}/static/' in html and f'action="{PREFIX}/jobs/{job_id}/retry"' in html
    assert 'href="/health/"' not in html and f'href="{PREFIX}/health/"' in html
    token = _TOKEN.search(html)
    assert token
    # no CSRF token: refused, nothing changes
    assert admin.post(f"{PREFIX}/jobs/{job_id}/retry").status_code == 400
    done = admin.post(f"{PREFIX}/jobs/{job_id}/retry", data={"csrf_token": token.group(1), "confirm": "yes"})
    assert done.status_code == 303 and done.headers["Location"].startswith(f"{PREFIX}/jobs/{job_id}")
    with psycopg.connect(db_url, autocommit=True) as conn:
        assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (job_id,)) == "queued"
    # the console's cookie is its own, scoped to the prefix: the host's session is intact
    assert admin.get("/").get_data(as_text=True) == "host home, user=alice"
    static = admin.get(f"{PREFIX}/static/htmx-2.0.11.min.js")
    assert static.status_code == 200 and len(static.data) > 10_000
    static.close()


def test_live_fragments_poll_under_the_prefix(host: Flask) -> None:
    admin = host.test_client()
    admin.get("/login?user=alice")
    html = admin.get(f"{PREFIX}/").get_data(as_text=True)
    polls = re.findall(r'hx-get="([^"]+)"', html)
    assert polls and all(p.startswith(f"{PREFIX}/") for p in polls)
    fragment = admin.get(polls[0], headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and "<html" not in fragment.get_data(as_text=True)
    # the refresh setting returns to the page under the prefix
    back = admin.get(f"{PREFIX}/prefs?refresh=10&next={PREFIX}/dead/")
    assert back.status_code == 303 and back.headers["Location"] == f"{PREFIX}/dead/"


def test_bad_mount_arguments_are_refused(db_url: str) -> None:
    app = Flask("h")
    with pytest.raises(ConfigError, match="url_prefix"):
        mount(app, "admin/jobs", authorize=lambda r: "admin", database_url=db_url)
    with pytest.raises(ConfigError, match="authorize"):
        mount(app, "/jobs", authorize="yes", database_url=db_url)  # type: ignore[arg-type]


def test_mount_borrows_the_hosts_pool(db_url: str) -> None:
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(db_url, min_size=1, max_size=2, open=True)  # a transactional pool, as hosts have
    try:
        app = Flask("h")
        app.secret_key = "k"
        console = mount(app, "/jobs", authorize=lambda r: "admin", pool=pool)
        assert app.test_client().get("/jobs/").status_code == 200
        close_app(console)
        assert not pool.closed  # the host's pool stays the host's
        with pool.connection() as conn:
            assert conn.autocommit is False  # handed back as it was lent
    finally:
        pool.close()


# ---- /metrics for a scraper (issue 35, defect 7) -------------------------------------------------

SCRAPE_TOKEN = "scrape-token-0123456789"


def _mounted(db_url: str, **options: Any) -> tuple[Flask, Flask]:
    app = Flask("scraped_host")
    app.secret_key = "host-secret"
    console = mount(app, PREFIX, authorize=lambda request: None, database_url=db_url, **options)
    return app, console


def test_a_scraper_reads_metrics_with_the_mounts_token(db_url: str) -> None:
    app, console = _mounted(db_url, metrics_token=SCRAPE_TOKEN)
    try:
        scraper = app.test_client()
        answer = scraper.get(f"{PREFIX}/metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})
        assert answer.status_code == 200, answer.get_data(as_text=True)
        assert "skiplock_up 1.0" in answer.get_data(as_text=True)
        # a wrong token, or none, is asked of the host's authorize hook, which refuses strangers
        assert scraper.get(f"{PREFIX}/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 403
        assert scraper.get(f"{PREFIX}/metrics").status_code == 403
        # the token opens /metrics only
        assert scraper.get(f"{PREFIX}/", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"}).status_code == 403
    finally:
        close_app(console)


def test_public_metrics_under_a_mount(db_url: str) -> None:
    app, console = _mounted(db_url, metrics_public=True)
    try:
        answer = app.test_client().get(f"{PREFIX}/metrics")
        assert answer.status_code == 200 and "skiplock_up 1.0" in answer.get_data(as_text=True)
        assert app.test_client().get(f"{PREFIX}/dead/").status_code == 403
    finally:
        close_app(console)


def test_metrics_options_that_cannot_work_are_refused(db_url: str) -> None:
    with pytest.raises(ConfigError, match="at least 16"):
        _mounted(db_url, metrics_token="short")
    with pytest.raises(ConfigError, match="not both"):
        _mounted(db_url, metrics_token=SCRAPE_TOKEN, metrics_public=True)
