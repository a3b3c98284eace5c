"""Every page with real rows: numbers, fragments, pagination, filters, escaping, 400/404."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from skiplock.webapp.shared import counts
from tests.support.factory import make_job

REPO = Path(__file__).resolve().parents[2]


def test_vendored_htmx_matches_its_checksum():
    recorded = (REPO / "static" / "htmx-2.0.11.min.js.sha256").read_text().split()[0]
    actual = hashlib.sha256((REPO / "static" / "htmx-2.0.11.min.js").read_bytes()).hexdigest()
    assert actual == recorded
    assert 'src="/static/htmx-2.0.11.min.js"' in (REPO / "templates" / "layout.html").read_text().replace(
        "{{ url_for('static', filename='htmx-2.0.11.min.js') }}", "/static/htmx-2.0.11.min.js")


def test_healthz_reports_an_unreachable_database(make_app):
    app = make_app(DATABASE_URL="postgresql://postgres@127.0.0.1:1/nowhere?connect_timeout=1")
    response = app.test_client().get("/healthz")
    assert response.status_code == 503
    assert response.headers["Cache-Control"] == "no-store"


def _row(html: str, queue: str) -> list[str]:
    match = re.search(rf'<tr class="[^"]*" data-queue="{re.escape(queue)}">(.*?)</tr>', html, re.S)
    assert match, f"no overview row for {queue}"
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", match.group(1), re.S)]


def test_overview_numbers(admin, conn):
    for _ in range(3):
        make_job(conn, "t1", "queued", run_in=-120)
    make_job(conn, "t1", "queued", run_in=3600)
    make_job(conn, "t1", "running")
    make_job(conn, "t1", "dead")
    make_job(conn, "t2", "dead")
    conn.execute("INSERT INTO job_stats (minute, queue, worker_id, completed) "
                 "SELECT date_trunc('minute', now()) - make_interval(mins => m), 't1', 'w', 10 "
                 "FROM generate_series(1, 5) m")
    html = admin.get("/").get_data(as_text=True)
    cells = _row(html, "t1")
    # queue, ready, scheduled, running, dead, oldest ready, p99 wait, completed/min, chart
    assert cells[1:5] == ["3", "1", "1", "1"]
    assert cells[5].startswith("2m") and cells[6].startswith("2m")
    assert cells[7] == "10.0"
    assert _row(html, "t2")[4] == "1"
    # the five minutes with data: one bar each in t1's sparkline and in the all-queues chart
    assert html.count('<rect class="succeeded"') == 10 and html.count("UTC t1: 10 succeeded") == 5


def test_overview_caps_big_counts(admin, conn, monkeypatch):
    monkeypatch.setattr(counts, "COUNT_CAP", 5)
    conn.execute("INSERT INTO jobs (queue, payload, run_at) SELECT 't3', '{}', now() - interval '1 minute' "
                 "FROM generate_series(1, 12)")
    cells = _row(admin.get("/").get_data(as_text=True), "t3")
    assert cells[1] == "5+"
    assert cells[6].startswith("≈")  # p99 sampled when the count is capped


def test_overview_fragment_for_htmx(admin, conn):
    make_job(conn, "t1")
    response = admin.get("/", headers={"HX-Request": "true"})
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "HX-Request" in response.headers["Vary"]
    assert html.lstrip().startswith('<section id="overview"') and "<html" not in html
    assert 'hx-trigger="every 5s, poll-now"' in html


def test_refresh_interval_is_selectable(admin):
    assert admin.get("/prefs?refresh=30&next=/workers/").headers["Location"] == "/workers/"
    assert 'hx-trigger="every 30s, poll-now"' in admin.get("/", headers={"HX-Request": "true"}).get_data(as_text=True)
    admin.get("/prefs?refresh=0")
    assert 'hx-trigger="poll-now"' in admin.get("/", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert admin.get("/prefs?refresh=7").status_code == 400


@pytest.mark.parametrize(("status", "sign"), [("ready", "-"), ("scheduled", "+")])
def test_queue_page_keyset_pagination_in_claim_order(admin, conn, status, sign):
    conn.execute("INSERT INTO jobs (queue, payload, priority, run_at) "
                 f"SELECT 't1', jsonb_build_object('n', g), g % 3, now() {sign} make_interval(secs => 1000 + g % 7) "
                 "FROM generate_series(1, 120) g")
    conn.execute("INSERT INTO jobs (queue, payload, run_at) VALUES "  # the other tab's job stays out
                 f"('t1', '{{}}', now() {'+' if sign == '-' else '-'} interval '1 hour')")
    expected = [r[0] for r in conn.execute(
        f"SELECT id FROM jobs WHERE queue = 't1' AND run_at {'<' if sign == '-' else '>'} now() "
        "ORDER BY priority DESC, run_at, id")]
    pages: list[list[int]] = []
    url = f"/queues/t1?status={status}"
    for _ in range(5):
        html = admin.get(url).get_data(as_text=True)
        pages.append([int(i) for i in re.findall(r'<tr data-job-id="(\d+)"', html)])
        nxt = re.search(r'href="([^"]+)" rel="next"', html)
        if not nxt:
            break
        url = nxt.group(1).replace("&amp;", "&")
        assert "offset" not in url.lower()
    assert len(expected) == 120 and [i for p in pages for i in p] == expected
    # and back again with "previous page" (keyset too): the same pages in reverse
    back: list[list[int]] = []
    for _ in range(5):
        prev = re.search(r'href="([^"]+)" rel="prev"', html)
        if not prev:
            break
        url = prev.group(1).replace("&amp;", "&")
        assert "before=" in url and "offset" not in url.lower()
        html = admin.get(url).get_data(as_text=True)
        back.append([int(i) for i in re.findall(r'<tr data-job-id="(\d+)"', html)])
    assert back == pages[-2::-1]


@pytest.mark.parametrize("status", ["ready", "scheduled", "running", "dead", "failed", "succeeded"])
def test_queue_page_each_status(admin, conn, status):
    db_status = {"ready": "queued", "scheduled": "queued"}.get(status, status)
    job = make_job(conn, "t1", db_status, run_in=3600 if status == "scheduled" else 0)
    other = make_job(conn, "t1", "running" if db_status != "running" else "dead")
    html = admin.get(f"/queues/t1?status={status}").get_data(as_text=True)
    assert f'data-job-id="{job}"' in html and f'data-job-id="{other}"' not in html


def test_queue_page_filters(admin, conn):
    a = make_job(conn, "t1", payload={"customer": "acme-42"})
    b = make_job(conn, "t1", unique_key="invoice:7")
    c = make_job(conn, "t1", payload={"customer": "100%_off"})
    ids_for = lambda url: {int(i) for i in re.findall(r'data-job-id="(\d+)"', admin.get(url).get_data(as_text=True))}  # noqa: E731
    assert ids_for("/queues/t1?q=acme") == {a}
    assert ids_for("/queues/t1?q=invoice") == {b}
    assert ids_for(f"/queues/t1?id={c}") == {c}
    assert ids_for("/queues/t1?q=%25_") == {c}  # % and _ are literal, not wildcards
    assert ids_for("/queues/t1") == {a, b, c}


@pytest.mark.parametrize("url", ["/queues/t1?status=bogus", "/queues/t1?id=12x", "/queues/t1?id=-1",
                                 "/queues/t1?after=nonsense", "/queues/t1?after=123_456", "/dead/?window=2y",
                                 "/dead/?status=queued", "/dead/?after=1_2_3_4", "/jobs/abc", "/jobs/0",
                                 "/jobs/99999999999999999999", "/running/?queue=" + "x" * 200,
                                 "/queues/t1?q=" + "y" * 300])
def test_malformed_filters_and_ids_are_400(admin, url):
    assert admin.get(url).status_code == 400


def test_unknown_job_is_404(admin):
    response = admin.get("/jobs/424242")
    assert response.status_code == 404 and b"No job 424242" in response.data


def test_job_detail(admin, conn):
    job = make_job(conn, "t1", "dead", payload={"to": "a@example.com", "n": [1, 2]}, unique_key="k:1",
                   last_error="ValueError: bad\nTraceback (most recent call last):\n  File \"x.py\", line 1",
                   attempts=5)
    html = admin.get(f"/jobs/{job}").get_data(as_text=True)
    assert '"to": "a@example.com"' in html.replace("&#34;", '"')  # pretty JSON
    assert "Traceback (most recent call last)" in html and "k:1" in html and "5 of 5" in html
    assert f"/jobs/{job}/retry" in html and f"/jobs/{job}/purge" in html and "/cancel" not in html


def test_job_detail_actions_follow_state(admin, conn):
    scheduled = make_job(conn, "t1", "queued", run_in=600)
    html = admin.get(f"/jobs/{scheduled}").get_data(as_text=True)
    assert "/run-now" in html and "/cancel" in html and "/retry" not in html
    running = make_job(conn, "t1", "running")
    assert "/release" in admin.get(f"/jobs/{running}").get_data(as_text=True)


def test_everything_user_supplied_is_escaped(admin, conn):
    evil = "<script>alert('x')</script>"
    job = make_job(conn, evil, "dead", payload={"html": evil}, last_error=evil, unique_key=evil)
    make_job(conn, evil, "queued")
    for url in ["/", f"/jobs/{job}", "/dead/", "/dead/?queue=" + evil, "/running/"]:
        html = admin.get(url).get_data(as_text=True)
        assert "<script>alert" not in html, url
    assert "&lt;script&gt;" in admin.get(f"/jobs/{job}").get_data(as_text=True)


def test_long_runners(admin, conn):
    old = make_job(conn, "t1", "running", lease_in=-5)
    conn.execute("UPDATE jobs SET started_at = now() - interval '2 hours' WHERE id = %s", (old,))
    new = make_job(conn, "t2", "running")
    html = admin.get("/running/").get_data(as_text=True)
    assert html.index(f'data-job-id="{old}"') < html.index(f'data-job-id="{new}"')
    assert "expired" in html and "2h 00m" in html


def test_dead_letters_grouped_by_queue_and_first_error_line(admin, conn):
    for _ in range(4):
        make_job(conn, "t1", "dead", last_error="TimeoutError: upstream\nTraceback ... line 9")
    make_job(conn, "t1", "dead", last_error="KeyError: 'id'\nTraceback")
    make_job(conn, "t2", "dead", last_error="TimeoutError: upstream\nTraceback")
    make_job(conn, "t1", "dead", last_error="old", finished_ago=3 * 86400)
    html = admin.get("/dead/?window=24h").get_data(as_text=True)
    groups = re.findall(r"<td [^>]*><span class=\"qname\" title=\"(t\d)\">t\d</span></td>\s*"
                        r"<td class=\"err[^\"]*\"[^>]*><a [^>]*>([^<]*)</a></td>\s*<td class=\"num\"[^>]*>(\d+)", html)
    assert groups[0] == ("t1", "TimeoutError: upstream", "4")
    assert ("t2", "TimeoutError: upstream", "1") in groups and ("t1", "KeyError: &#39;id&#39;", "1") in groups
    assert all(g[1] != "old" for g in groups)
    assert "old" in admin.get("/dead/?window=7d").get_data(as_text=True)


def test_dead_list_filtered_by_error(admin, conn):
    a = make_job(conn, "t1", "dead", last_error="TimeoutError: upstream\nTraceback")
    b = make_job(conn, "t1", "dead", last_error="KeyError: 'id'")
    html = admin.get("/dead/?error=TimeoutError:+upstream").get_data(as_text=True)
    assert f'data-job-id="{a}"' in html and f'data-job-id="{b}"' not in html


def test_workers_page_marks_stale(admin, conn):
    conn.execute("INSERT INTO workers (id, host, pid, queues, concurrency, in_flight, last_seen) VALUES "
                 "('w-live', 'h1', 11, '{t1,t2}', 8, 3, now()), "
                 "('w-gone', 'h2', 22, '{t1}', 4, 0, now() - interval '5 minutes')")
    html = admin.get("/workers/").get_data(as_text=True)
    live = re.search(r'data-worker-id="w-live">(.*?)</tr>', html, re.S).group(1)  # type: ignore[union-attr]
    gone = re.search(r'data-worker-id="w-gone">(.*?)</tr>', html, re.S).group(1)  # type: ignore[union-attr]
    assert "t1, t2" in live and "live" in live and "stale" not in live
    assert "stale" in gone


def test_pages_say_503_when_the_database_is_down(make_app):
    app = make_app(DATABASE_URL="postgresql://postgres@127.0.0.1:1/nowhere?connect_timeout=1", POOL_TIMEOUT=1.0)
    response = app.test_client().get("/workers/", auth=("ops-admin", "correct horse battery"))
    assert response.status_code == 503 and b"database is not answering" in response.data


def test_text_search_reads_bounded_windows_and_finds_everything(admin, conn, monkeypatch):
    from skiplock.webapp.pages import queues

    monkeypatch.setattr(queues, "SEARCH_WINDOW", 10)
    conn.execute("INSERT INTO jobs (queue, payload, run_at) SELECT 't1', "
                 "CASE WHEN g IN (5, 30) THEN '{\"needle\": true}'::jsonb ELSE jsonb_build_object('n', g) END, "
                 "now() - make_interval(secs => 100 - g) FROM generate_series(1, 35) g")
    expected = [r[0] for r in conn.execute("SELECT id FROM jobs WHERE payload ? 'needle' ORDER BY run_at")]
    found, pages = [], 0
    url: str | None = "/queues/t1?q=needle"
    while url and pages < 10:
        html = admin.get(url).get_data(as_text=True)
        pages += 1
        found += [int(i) for i in re.findall(r'<tr data-job-id="(\d+)"', html)]
        nxt = re.search(r'href="([^"]+)" rel="next">next page', html)
        url = nxt.group(1).replace("&amp;", "&") if nxt else None
        if url:
            assert "Searched 10 jobs from here" in html
    assert found == expected and pages == 4


def test_dead_groups_read_a_bounded_number_of_rows(admin, conn, monkeypatch):
    from skiplock.webapp.pages import dead

    monkeypatch.setattr(dead, "GROUPS_SCAN", 3)
    for ago in range(5):
        make_job(conn, "t1", "dead", last_error="E: same", finished_ago=ago * 60)
    html = admin.get("/dead/").get_data(as_text=True)
    assert re.search(r'E: same</a></td>\s*<td class="num"[^>]*>3<', html)
    assert "Grouped the newest 3 dead jobs" in html
    monkeypatch.setattr(dead, "GROUPS_SCAN", 10)
    html = admin.get("/dead/").get_data(as_text=True)
    assert re.search(r'E: same</a></td>\s*<td class="num"[^>]*>5<', html) and "Grouped the newest" not in html


def test_overview_dead_count_links_to_a_list_that_shows_as_many(admin, conn):
    """The overview counts every dead job of a queue; its link must not open a 24 h window of fewer."""
    import re

    conn.execute("INSERT INTO jobs (queue, payload, status, attempts, finished_at, last_error) VALUES "
                 "('agequeue', '{}', 'dead', 1, now() - interval '3 days', 'old failure'), "
                 "('agequeue', '{}', 'dead', 1, now(), 'new failure')")
    html = admin.get("/").get_data(as_text=True)
    link = re.search(r'<a href="([^"]*dead/[^"]*queue=agequeue[^"]*)" data-count="dead">2</a>', html)
    assert link, "the overview shows 2 dead jobs with a link"
    listed = admin.get(link.group(1).replace("&amp;", "&")).get_data(as_text=True)
    assert len(re.findall(r'<tr data-job-id="', listed)) == 2
