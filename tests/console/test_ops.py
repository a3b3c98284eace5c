"""The ops blueprint: /metrics (public, optional bearer token) and the /health page."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from skiplock import enqueue_many
from tests.console.conftest import ADMIN


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_metrics_is_public_parses_and_matches_the_database(app, conn):
    enqueue_many([("web-q", {"i": i}) for i in range(5)])
    response = app.test_client().get("/metrics")  # no login: Prometheus scrapes without one
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain")
    m = _samples(response.get_data(as_text=True))
    ready = conn.execute("SELECT count(*) FROM jobs WHERE queue = 'web-q' AND status = 'queued'").fetchone()[0]
    assert m[("skiplock_queue_jobs", (("queue", "web-q"), ("state", "ready")))] == ready == 5
    assert m[("skiplock_up", ())] == 1


def test_metrics_token_when_configured(make_app):
    client = make_app(METRICS_TOKEN="s3cret").test_client()
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_health_page_needs_login_and_shows_every_check(app, admin, conn):
    assert app.test_client().get("/health").status_code == 401
    page = admin.get("/health")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    for name in ("claim plan", "long transactions", "jobs table", "throughput envelope", "connection budget"):
        assert f'data-check="{name}"' in html
    assert 'href="/health/"' in html  # the nav shows Health once this blueprint is registered
    # its address ends in "/" as every other page's does; the old one still answers
    assert admin.get("/health/").status_code == 200 and admin.get("/health").status_code == 200
    # the CI server runs with autovacuum off: the page says so, with what to do
    if conn.execute("SHOW autovacuum").fetchone()[0] == "off":
        assert 'data-check="jobs table" data-status="fail"' in html
        assert "Autovacuum is off" in html
    fragment = admin.get("/health", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert fragment.lstrip().startswith("<section") and 'id="health"' in fragment


def test_health_page_escapes_session_details(admin, db_url):
    import psycopg

    with psycopg.connect(db_url, application_name="<script>alert(1)</script>") as holder:
        holder.execute("SELECT txid_current()")
        html = admin.get("/health").get_data(as_text=True)
        holder.rollback()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;" in html
    assert ADMIN[0] in html
