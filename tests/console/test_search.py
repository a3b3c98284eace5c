"""The console's search (issue 36): jobs by id, queue, state, a payload field, unique key, lock key,
tenant or error text, each filter in the URL, keyset pages on id.

Jobs come through the public API (enqueue / enqueue_many), dead jobs with real tracebacks from a real
worker; the page is read through its real route.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest

from skiplock import enqueue, enqueue_many
from skiplock.webapp.db import get_pool
from skiplock.webapp.pages.search import PAGE_SIZE
from skiplock.webapp.queries import search_queries
from skiplock.webapp.shared import search_filter
from tests.console.conftest import ADMIN, Session, login
from tests.console.test_dead_groups_from_a_worker import KINDS, _worker_made_dead_jobs
from tests.support.factory import make_job

HX = {"HX-Request": "true"}


def listed(session: Any, **query: Any) -> list[int]:
    """The job ids the search page lists for `query`, in page order (the page must answer 200)."""
    response = session.get("/search/", query_string=query)
    assert response.status_code == 200, response.get_data(as_text=True)[:2000]
    return [int(i) for i in re.findall(r'data-job-id="(\d+)"', response.get_data(as_text=True))]


@pytest.fixture
def shop(db_url: str) -> dict[str, Any]:
    """A handful of jobs over two queues, with payloads, keys, lock keys and tenants."""
    ids: dict[str, Any] = {}
    ids["c42_pro"] = enqueue("emails", {"customer": {"id": 42, "plan": "pro"},
                                        "items": [{"sku": "A-1"}, {"sku": "B-2"}]},
                             unique_key="welcome:42", tenant="acme")
    ids["c42_free"] = enqueue("billing", {"customer": {"id": 42, "plan": "free"}, "items": [{"sku": "B-2"}]},
                              lock_key="account:42", tenant="acme")
    ids["c42_str"] = enqueue("billing", {"customer": {"id": "42"}}, lock_key="account:42")
    ids["c7"] = enqueue("emails", {"customer": {"id": 7, "plan": "pro"}, "to": "ann@example.com"},
                        unique_key="welcome:7", tenant="globex")
    ids["flag"] = enqueue("emails", {"customer": {"id": 8, "vip": True, "note": None}})
    ids["many"] = enqueue_many([{"queue": "reports", "payload": {"report": n, "customer": {"id": 1000 + n}},
                                 "tenant": "initech"} for n in range(5)])
    return ids


def test_each_filter_finds_exactly_its_jobs(admin: Any, shop: dict[str, Any]) -> None:
    assert listed(admin, id=shop["c7"]) == [shop["c7"]]
    assert set(listed(admin, queue="billing")) == {shop["c42_free"], shop["c42_str"]}
    # a number and a string are different JSON values: 42 is not "42"
    assert set(listed(admin, path="customer.id", value="42")) == {shop["c42_pro"], shop["c42_free"]}
    assert listed(admin, path="customer.id", value='"42"') == [shop["c42_str"]]
    # a bare word is a string; true and null are JSON's
    assert listed(admin, path="to", value="ann@example.com") == [shop["c7"]]
    assert listed(admin, path="customer.vip", value="true") == [shop["flag"]]
    assert listed(admin, path="customer.note", value="null") == [shop["flag"]]
    # an element of an array
    assert set(listed(admin, path="items[].sku", value="B-2")) == {shop["c42_pro"], shop["c42_free"]}
    assert listed(admin, path="items[].sku", value="A-1") == [shop["c42_pro"]]
    assert listed(admin, unique_key="welcome:42") == [shop["c42_pro"]]
    assert set(listed(admin, lock_key="account:42")) == {shop["c42_free"], shop["c42_str"]}
    assert set(listed(admin, tenant="acme")) == {shop["c42_pro"], shop["c42_free"]}
    assert listed(admin, tenant="initech") == sorted(shop["many"], reverse=True)  # newest first
    assert listed(admin, state="queued", queue="reports") == sorted(shop["many"], reverse=True)
    assert listed(admin, state="dead") == []
    # exact matches: a key's prefix finds nothing
    assert listed(admin, unique_key="welcome") == []
    assert listed(admin, tenant="acm") == []


def test_combined_filters_are_all_required(admin: Any, shop: dict[str, Any]) -> None:
    assert listed(admin, path="customer.id", value="42", queue="billing") == [shop["c42_free"]]
    assert listed(admin, path="customer.plan", value="pro", tenant="globex") == [shop["c7"]]
    assert listed(admin, path="customer.plan", value="pro", tenant="acme", unique_key="welcome:42") == [shop["c42_pro"]]
    assert listed(admin, path="customer.id", value="42", state="running") == []
    # an id and a filter it does not match: nothing
    assert listed(admin, id=shop["c7"], queue="billing") == []
    assert listed(admin, id=shop["c7"], queue="emails", tenant="globex") == [shop["c7"]]


def test_error_text_finds_dead_jobs_a_real_worker_made(admin: Any, conn: psycopg.Connection,
                                                       spawn_worker: Any) -> None:
    ids = _worker_made_dead_jobs(conn, spawn_worker)
    # the message of the last line, a frame of the traceback, and a custom exception's name
    assert set(listed(admin, error="has no shipping address")) == set(ids["value"])
    assert set(listed(admin, error="_call_the_api")) == set(ids["connection"])
    assert set(listed(admin, error="paymentdeclined")) == set(ids["chained"])  # any case
    assert set(listed(admin, error="Traceback", state="dead")) == {i for v in ids.values() for i in v}
    assert len(listed(admin, error="Traceback")) == sum(KINDS.values())
    # with the payload: the one job of that order
    order = conn.execute("SELECT payload->>'order' FROM jobs WHERE id = %s", (ids["key"][1],)).fetchone()
    assert order is not None
    assert listed(admin, error="KeyError", path="order", value=order[0]) == [ids["key"][1]]
    # % and _ are the operator's characters, not wildcards
    assert listed(admin, error="no%shipping") == []
    assert listed(admin, error="has no shipping", state="queued") == []


def test_bad_path_or_value_says_what_to_type_and_lists_nothing(admin: Any, shop: dict[str, Any]) -> None:
    cases = {
        (("path", "customer..id"), ("value", "42")): "bad payload path",
        (("path", "customer.id"), ("value", '{"a": ')): "is not valid JSON",
        (("path", "customer.id"), ("value", "NaN")): "is not JSON",
        (("path", "customer.id"), ("value", "")): "needs a value",
        (("path", ""), ("value", "42")): "needs a JSON path too",
        (("path", "a[0].b"), ("value", "1")): "bad payload path",
        (("error", "ab"),): "at least 3 characters",
        (("state", "sleeping"),): "state must be one of",
        (("id", "12abc"),): "id must be a positive whole number",
        (("id", "²"),): "id must be a positive whole number",
        (("after", "-1"),): "page cursor must be a positive whole number",
        (("path", "x"), ("value", '"\\u0000"')): "NUL character",
    }
    for query, message in cases.items():
        response = admin.get("/search/", query_string=dict(query))
        html = response.get_data(as_text=True)
        assert response.status_code == 400, (query, html[:500])
        assert message in html, (query, message)
        assert 'data-job-id="' not in html, query
        # the form keeps what was typed, so it can be corrected
        for name, value in query:
            if value and name not in ("state", "after") and "\\u0000" not in value:
                assert f'name="{name}" value="' in html
        # htmx swaps no 4xx: its fragment answers 200 with the same message, and only the results
        fragment = admin.get("/search/", query_string=dict(query), headers=HX)
        assert fragment.status_code == 200 and message in fragment.get_data(as_text=True)
        assert "<form" not in fragment.get_data(as_text=True)


def test_hostile_values_are_bound_and_escaped(admin: Any, shop: dict[str, Any], conn: psycopg.Connection) -> None:
    before = conn.execute("SELECT count(*) FROM jobs").fetchone()
    for value in ["' OR '1'='1", "1; DROP TABLE jobs; --", "<script>alert(1)</script>"]:
        for name in ("queue", "unique_key", "lock_key", "tenant", "error"):
            assert listed(admin, **{name: value}) == []
        response = admin.get("/search/", query_string={"path": value, "value": value})
        assert response.status_code in (200, 400)
        assert "<script>alert(1)</script>" not in response.get_data(as_text=True)
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == before


def test_the_url_is_the_search(admin: Any, shop: dict[str, Any]) -> None:
    query = {"path": "customer.id", "value": "42", "queue": "emails", "tenant": "acme"}
    html = admin.get("/search/", query_string=query).get_data(as_text=True)
    for name, value in query.items():  # the form shows the search the URL holds
        assert f'name="{name}" value="{value}"' in html
    # htmx is told to push the search's URL without the form's empty fields
    response = admin.get("/search/", query_string={**query, "id": "", "state": "", "error": ""}, headers=HX)
    pushed = urlsplit(response.headers["HX-Push-Url"])
    assert pushed.path == "/search/"
    assert {k: v[0] for k, v in parse_qs(pushed.query).items()} == query
    assert re.findall(r'data-job-id="(\d+)"', response.get_data(as_text=True)) == [str(shop["c42_pro"])]


def test_reached_from_the_nav_and_from_the_queue_and_dead_pages(admin: Any, shop: dict[str, Any]) -> None:
    assert 'href="/search/"' in admin.get("/").get_data(as_text=True)
    assert 'href="/search/?queue=emails"' in admin.get("/queues/emails").get_data(as_text=True)
    assert 'href="/search/?state=dead"' in admin.get("/dead/").get_data(as_text=True)


def test_keyset_pages_cover_every_match_once_across_the_window(admin: Any, db_url: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # a small window, so that pages are made of both steps: the newest jobs, then the index
    monkeypatch.setattr(search_queries, "RECENT_WINDOW", 30)
    matching = enqueue_many([{"queue": "q", "payload": {"tag": "x", "n": n}} for n in range(70)])
    enqueue_many([{"queue": "q", "payload": {"tag": "y", "n": n}} for n in range(40)])  # newer, not matching
    seen: list[int] = []
    url = "/search/?path=tag&value=x"
    while url:
        html = admin.get(url).get_data(as_text=True)
        page = [int(i) for i in re.findall(r'data-job-id="(\d+)"', html)]
        assert len(page) <= PAGE_SIZE
        seen += page
        older = re.search(r'<a href="([^"]+)"\s+hx-get="[^"]+"\s+hx-target="#search-results" '
                          r'hx-swap="outerHTML" hx-push-url="true">older', html)
        url = older.group(1).replace("&amp;", "&") if older else ""
    assert seen == sorted(matching, reverse=True)


def test_a_rare_match_older_than_the_window_is_found(admin: Any, conn: psycopg.Connection,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_queries, "RECENT_WINDOW", 10)
    old = enqueue("q", {"customer": {"id": 5}}, unique_key="k-old", lock_key="l-old", tenant="t-old")
    # a running job, which migration 030's indexes leave out: found through the running jobs' index
    running = make_job(conn, "q", "running", payload={"customer": {"id": 5}}, last_error="ValueError: first try")
    enqueue_many([{"queue": "q", "payload": {"customer": {"id": 6}}} for _ in range(25)])
    for query in ({"unique_key": "k-old"}, {"lock_key": "l-old"}, {"tenant": "t-old"},
                  {"state": "queued", "queue": "q", "tenant": "t-old"},
                  {"state": "queued", "path": "customer.id", "value": "5"}):
        assert listed(admin, **query) == [old], query
    assert listed(admin, path="customer.id", value="5") == [running, old]
    assert listed(admin, path="customer.id", value="5", state="running") == [running]
    assert listed(admin, error="first try") == [running]
    assert listed(admin, state="running") == [running]


# ---- plans, not timings: each filter's statement can use its index (migration 030) --------------


def _plan(conn: psycopg.Connection, query: dict[str, str]) -> str:
    flt, problems = search_filter.read(query)
    assert not problems
    params = {**search_queries.params(flt, PAGE_SIZE), "before": 2**62}
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")  # a few thousand rows: make the choice the big table's
        rows = conn.execute("EXPLAIN " + search_queries.indexed(flt), params).fetchall()
    return "\n".join(r[0] for r in rows)


def test_the_index_step_uses_each_filters_index(db_url: str) -> None:
    enqueue_many([{"queue": f"q{n % 3}", "payload": {"customer": {"id": n}, "items": [{"sku": f"S{n % 50}"}]},
                   "unique_key": f"k{n}" if n % 2 else None, "lock_key": f"l{n % 100}" if n % 3 else None,
                   "tenant": f"t{n % 20}" if n % 5 else None} for n in range(3000)])
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE jobs SET last_error = 'ValueError: customer ' || id || ' has no card' "
                     "WHERE id % 10 = 0")  # setup only: the error-text plan needs rows with an error
        conn.execute("ANALYZE jobs")
        expected = {
            "jobs_payload_idx": [{"path": "customer.id", "value": "42"}, {"path": "items[].sku", "value": "S7"},
                                 {"path": "customer.id", "value": "42", "queue": "q0", "state": "queued"}],
            "jobs_unique_key_idx": [{"unique_key": "k41"}],
            "jobs_lock_key_idx": [{"lock_key": "l41"}],
            "jobs_tenant_idx": [{"tenant": "t3"}],
            "jobs_last_error_trgm_idx": [{"error": "customer 1230 has"}],
        }
        for index, queries in expected.items():
            for query in queries:
                plan = _plan(conn, query)
                assert index in plan, (query, plan)
                assert "jobs_pkey" not in plan, plan
        # running jobs, which migration 030's indexes leave out, through their own index
        plan = _plan(conn, {"path": "customer.id", "value": "42"})
        assert "jobs_running_idx" in plan and "jobs_payload_idx" in plan, plan
        # a state and a queue: through the state's partial index, not a walk of every job
        plan = _plan(conn, {"state": "dead", "queue": "q0"})
        assert "jobs_pkey" not in plan and re.search(r"jobs_(finished|dead_\w+)_idx", plan), plan
        plan = _plan(conn, {"state": "running"})
        assert "jobs_running_idx" in plan, plan


def test_search_statements_are_never_prepared(make_app: Any, shop: dict[str, Any]) -> None:
    """psycopg prepares a statement it has run 5 times, and PostgreSQL may then plan it once for any
    values: such a plan cannot use a partial index whose predicate names a state (status = $1), and the
    benchmark's "queue with no failed jobs" then walked every job. Each search is planned for its values."""
    app = make_app(POOL_SIZE=1)  # one connection, so the statements it prepared can be read from it
    client = app.test_client()
    login(client, *ADMIN)
    session = Session(client)
    for _ in range(8):
        assert listed(session, state="failed", queue="billing") == []
        assert listed(session, path="customer.id", value="42", queue="billing") == [shop["c42_free"]]
    with get_pool(app).connection() as conn:
        prepared = [r[0] for r in conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()]
        # only for the console's borrows (webapp/db.py): the connection goes back to its pool as it came,
        # a host's pool included
        assert conn.prepare_threshold == 5
    assert prepared == [] or not [s for s in prepared if "FROM jobs" in s], prepared
