"""The queue page's per-tenant limits form (templates/queues/_flow.html, route queues.tenant_limit): set,
read back, bad input writes nothing, admin only, and each kind of limit removed keeps the other."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest

from skiplock.core.features import limits
from tests.support.helpers import scalar

URL = "/queues/t1/tenant-limit"
AUDIT = "SELECT count(*) FROM audit_log WHERE action = 'limit queue per tenant'"


def _row(conn: Any) -> Any:
    return conn.execute("SELECT concurrency, rate, burst, tenant_concurrency, tenant_rate, tenant_burst, updated_by "
                        "FROM queue_limits WHERE queue = 't1'").fetchone()


def _text(session: Any, url: str = "/queues/t1") -> str:
    html = session.get(url).get_data(as_text=True)
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


def test_per_tenant_limits_set_from_the_console_are_stored_shown_and_audited(admin: Any, conn: Any) -> None:
    assert "No per-tenant limit. Set one here" in _text(admin)
    response = admin.post(URL, data={"tenant_concurrency": "3", "tenant_rate": "10/s"})
    assert response.status_code == 303 and response.headers["Location"].endswith("/queues/t1")
    assert _row(conn) == (None, None, None, 3, 10.0, 1.0, "ops-admin")
    [row] = limits.list_limits(conn)
    assert (row.tenant_concurrency, row.tenant_rate, row.global_limits) == (3, 10.0, False)
    text = _text(admin)  # the flash, then the panel, on the page the redirect leads to
    assert ("Each tenant of queue t1 limited to concurrency 3 and rate 10/s (tolerance 1); workers pick it up "
            "within a second.") in text
    assert "Per-tenant limits (each tenant of the queue, on top of the limits above): concurrency 3 , rate 10/s" in text
    html = admin.get("/queues/t1").get_data(as_text=True)
    assert 'name="tenant_concurrency" inputmode="numeric" size="6" value="3"' in html
    assert 'name="tenant_rate" size="8" value="10/s"' in html
    assert "Remove per-tenant limits" in html
    actor, role, count, detail = conn.execute(
        "SELECT actor, role, count, detail FROM audit_log WHERE action = 'limit queue per tenant'").fetchone()
    assert (actor, role, count) == ("ops-admin", "admin", 0)
    assert detail == {"queue": "t1", "concurrency": 3, "rate": 10.0, "burst": 1.0}

    # one of the two alone: the other is removed (the form shows both, so a blank field means none)
    assert admin.post(URL, data={"tenant_concurrency": "", "tenant_rate": "30/m"}).status_code == 303
    assert _row(conn)[3:6] == (None, 0.5, 1.0)
    assert "Each tenant of queue t1 limited to rate 0.5/s (tolerance 1)" in _text(admin)
    assert scalar(conn, AUDIT) == 2


@pytest.mark.parametrize("bad, says", [
    ({"tenant_concurrency": "0"}, "concurrency must be a whole number from 1 to 1,000,000, got 0"),
    ({"tenant_concurrency": "-1"}, "concurrency must be a whole number from 1 to 1,000,000, got -1"),
    ({"tenant_concurrency": "abc"}, "concurrency must be a whole number from 1 to 1,000,000, got 'abc'"),
    ({"tenant_concurrency": "2.5"}, "concurrency must be a whole number"),
    ({"tenant_concurrency": "1000001"}, "concurrency must be a whole number from 1 to 1,000,000"),
    ({"tenant_rate": "fast"}, "rate must be a number per second or like '100/s', got 'fast'"),
    ({"tenant_rate": "0"}, "rate must be > 0"),
    ({"tenant_rate": "-1"}, "rate must be a number per second or like '100/s', got '-1'"),
    ({"tenant_rate": "10/fortnight"}, "rate unit must be /s, /m or /h"),
    # one good value is not written either
    ({"tenant_concurrency": "4", "tenant_rate": "fast"}, "rate must be a number per second or like '100/s'"),
    ({"tenant_concurrency": " ", "tenant_rate": ""}, "give a per-tenant concurrency, a rate or both"),
])
def test_bad_input_says_why_and_writes_nothing(admin: Any, conn: Any, bad: dict[str, str], says: str) -> None:
    limits.set_limit(conn, "t1", concurrency=7, rate="50/s", actor="cli:alice")
    limits.set_tenant_limit(conn, "t1", concurrency=2, rate="5/s", burst=3, actor="cli:alice")
    before = _row(conn)
    assert admin.post(URL, data=bad).status_code == 303
    text = _text(admin)
    assert f"Per-tenant limits of t1 not changed: {says}" in text, text
    assert _row(conn) == before
    assert scalar(conn, AUDIT) == 0
    # a queue without limits gets no row from a refused form either
    assert admin.post("/queues/fresh/tenant-limit", data=bad).status_code == 303
    assert scalar(conn, "SELECT count(*) FROM queue_limits WHERE queue = 'fresh'") == 0


def test_read_only_login_and_a_missing_csrf_token_change_nothing(admin: Any, viewer: Any, conn: Any) -> None:
    limits.set_tenant_limit(conn, "t1", concurrency=2, rate=None, actor="cli:alice")
    before = _row(conn)
    assert viewer.post(URL, data={"tenant_concurrency": "9"}).status_code == 403
    assert viewer.post(URL, data={"clear": "yes"}).status_code == 403
    html = viewer.get("/queues/t1").get_data(as_text=True)
    assert re.search(r'<button type="submit" disabled title="read-only login">Set per-tenant limits</button>', html)
    no_token = admin.client.post(URL, data={"tenant_concurrency": "9"})
    assert no_token.status_code == 400
    assert _row(conn) == before and scalar(conn, AUDIT) == 0


def test_removing_per_tenant_limits_keeps_the_global_ones_and_the_reverse(admin: Any, conn: Any) -> None:
    assert admin.post("/queues/t1/limit", data={"concurrency": "7", "rate": "50/s"}).status_code == 303
    assert admin.post(URL, data={"tenant_concurrency": "2", "tenant_rate": "5/s"}).status_code == 303
    assert _row(conn)[:6] == (7, 50.0, 5.0, 2, 5.0, 1.0)
    assert "limited to concurrency 2 and rate 5/s (tolerance 1); workers pick it up within a second. Its global " \
        "limits stay as they are." in _text(admin)

    assert admin.post(URL, data={"tenant_concurrency": "2", "tenant_rate": "5/s", "clear": "yes"}).status_code == 303
    assert _row(conn)[:6] == (7, 50.0, 5.0, None, None, None)
    text = _text(admin)
    assert "Queue t1 has no per-tenant limit now. Its global limits stay as they are." in text
    assert "No per-tenant limit. Set one here" in text and "concurrency 7 (0 running)" in text
    assert "Remove per-tenant limits" not in text
    assert scalar(conn, "SELECT detail FROM audit_log WHERE action = 'limit queue per tenant' "
                        "ORDER BY id DESC LIMIT 1") == {"queue": "t1"}  # None values are left out of the trail

    # the global form's "Remove limits" removes the global ones only, as its flash says
    assert admin.post(URL, data={"tenant_concurrency": "2"}).status_code == 303
    assert admin.post("/queues/t1/limit", data={"clear": "yes"}).status_code == 303
    assert _row(conn)[:6] == (None, None, None, 2, None, None)
    text = _text(admin)
    assert "Queue t1 has no global limit now." in text and "No global limit. Set one here" in text
    assert "Per-tenant limits (each tenant of the queue, on top of the limits above): concurrency 2" in text

    # the last limit removed: no row is left
    assert admin.post(URL, data={"clear": "yes"}).status_code == 303
    assert _row(conn) is None and limits.list_limits(conn) == []
    assert "Queue t1 has no per-tenant limit now." in _text(admin)
    assert scalar(conn, AUDIT) == 4


def test_a_rate_left_as_shown_keeps_its_tolerance(admin: Any, conn: Any) -> None:
    # a burst set with the CLI (the form does not show it) survives a change of the concurrency alone
    limits.set_tenant_limit(conn, "t1", concurrency=2, rate="1/m", burst=5, actor="cli:alice")
    html = admin.get("/queues/t1").get_data(as_text=True)
    shown = re.search(r'name="tenant_rate" size="8" value="([^"]+)"', html)
    assert shown and shown.group(1) == "0.0166667/s"
    assert admin.post(URL, data={"tenant_concurrency": "4", "tenant_rate": shown.group(1)}).status_code == 303
    assert _row(conn)[3:6] == (4, 1 / 60, 5.0)  # the stored rate exactly, not the page's rounding
    # a new rate gets the default tolerance, as `skiplock queues limit --per-tenant-rate` gives it
    assert admin.post(URL, data={"tenant_concurrency": "4", "tenant_rate": "20/s"}).status_code == 303
    assert _row(conn)[3:6] == (4, 20.0, 2.0)
