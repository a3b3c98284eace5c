"""SKIPLOCK_CONSOLE_READ_URL (issue 36): read-only pages read from a second database, every action and
login counter uses DATABASE_URL, and the page says where it read from and how stale it may be.

A second database on the same server stands in for the standby (a streaming replica needs a second
cluster): what matters here is which connection each request uses. Against a database that is not a
standby the page says so rather than claiming a lag."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from skiplock import enqueue
from tests.console.conftest import ADMIN, Session, login


@pytest.mark.slow  # 8-25 s each (fuzzing, a second cluster, a subprocess suite): the full run, not the edit-test loop
def test_pages_read_from_the_read_url_and_actions_go_to_the_primary(make_app: Any, db_url: str,
                                                                    fresh_db_url: str) -> None:
    with psycopg.connect(db_url) as primary:  # (fresh_db_url moved DATABASE_URL: name the primary outright)
        primary_job = enqueue("t1", {"where": "primary"}, conn=primary)
    with psycopg.connect(fresh_db_url, autocommit=True) as replica:
        replica_job = replica.execute("INSERT INTO jobs (queue, payload) VALUES ('t1', '{\"where\": \"replica\"}') "
                                      "RETURNING id").fetchone()[0]  # type: ignore[index]
    app = make_app(READ_URL=fresh_db_url, DATABASE_URL=db_url)
    client = app.test_client()
    login(client, *ADMIN)  # the login's counters and session: the primary
    admin = Session(client)
    page = admin.get(f"/jobs/{replica_job}").get_data(as_text=True)
    assert "&#34;where&#34;: &#34;replica&#34;" in page  # only the read database has this job
    assert "Read from the\n      replica" in page and "not a standby" in page
    # an action runs on the primary, whatever the replica holds
    assert admin.post(f"/jobs/{primary_job}/purge").status_code in (303, 200)
    paused = admin.post("/queues/t1/pause", {"confirm": "yes"}, follow_redirects=True).get_data(as_text=True)
    assert "Queue t1 paused" in paused, re.findall(r"class=\"flash[^>]*>([^<]*)", paused)
    with psycopg.connect(db_url) as primary, psycopg.connect(fresh_db_url) as replica:
        assert primary.execute("SELECT count(*) FROM paused_queues").fetchone() == (1,)
        assert replica.execute("SELECT count(*) FROM paused_queues").fetchone() == (0,)
        assert primary.execute("SELECT count(*) FROM audit_log").fetchone()[0] >= 1  # type: ignore[index]
        assert replica.execute("SELECT count(*) FROM audit_log").fetchone() == (0,)


def test_without_a_read_url_no_page_mentions_a_replica(admin: Any) -> None:
    assert "Read from the" not in admin.get("/").get_data(as_text=True)
