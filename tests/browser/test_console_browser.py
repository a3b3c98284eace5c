"""The console in a real browser, against gunicorn with a real worker process running."""

from __future__ import annotations

import re

import pytest

from skiplock import enqueue
from tests.browser.conftest import log_in, save_screenshot
from tests.support.factory import make_job, status_of
from tests.support.helpers import scalar, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TRACEBACK = ("TimeoutError: upstream took longer than 30s\nTraceback (most recent call last):\n"
             '  File "app/tasks.py", line 42, in deliver\n    response = client.post(url, timeout=30)\n')


def _fail_on_dialog(page):
    def on_dialog(dialog):
        raise AssertionError(f"a dialog opened: {dialog.message!r}")

    page.on("dialog", on_dialog)


def test_retry_a_dead_job_and_see_it_run(page, console, conn, spawn_worker, tmp_path):
    spawn_worker(SKIPLOCK_POLL_INTERVAL="0.2")
    # some history for the overview's chart, and live queues to show
    conn.execute("INSERT INTO job_stats (minute, queue, worker_id, completed) "
                 "SELECT date_trunc('minute', now()) - make_interval(mins => m), q, 'w', (40 + 30 * sin(m / 4.0))::int "
                 "FROM generate_series(1, 59) m, unnest(ARRAY['t1', 't2']) q")
    conn.execute("INSERT INTO jobs (queue, payload, run_at) SELECT 'slow', '{}', now() + interval '1 hour' "
                 "FROM generate_series(1, 25)")
    # a backlog no worker here serves (no handler for 'reports'): ages and p99 wait show
    conn.execute("INSERT INTO jobs (queue, payload, run_at) SELECT 'reports', '{}', now() - make_interval(secs => g) "
                 "FROM generate_series(1, 1200) g")
    job = make_job(conn, "t1", "dead", payload={"order": 1001}, attempts=5, max_attempts=5, last_error=TRACEBACK)
    log_in(page, console)
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM workers") == 1, timeout=30, message="worker registered")
    page.reload()
    page.wait_for_selector("tr[data-queue=t1]")
    save_screenshot(page, "overview.png", tmp_path)

    page.click("nav >> text=Dead letters")
    row = page.locator(f"tr[data-job-id='{job}']")
    row.wait_for()
    assert "TimeoutError: upstream took longer than 30s" in row.inner_text()
    row.locator("button:has-text('retry')").click()
    page.click("button:has-text('Yes, retry 1 job')")  # the row's retry asks first
    page.wait_for_selector("text=Retried 1 job(s).")
    assert page.locator(f"tr[data-job-id='{job}']").count() == 0
    # the worker runs it: its effect is recorded, then the row is deleted on success
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (job,)) == 1,
             timeout=30, message="the retried job to run")
    wait_for(lambda: status_of(conn, job) is None, timeout=30, message="the retried job's ack")


def test_bulk_purge_a_filtered_set_after_confirming(page, console, conn, tmp_path):
    timeouts = [make_job(conn, "webhooks", "dead", last_error=TRACEBACK, payload={"hook": i}) for i in range(6)]
    others = [make_job(conn, "webhooks", "dead", last_error="KeyError: 'customer_id'\nTraceback ...")
              for _ in range(2)]
    others.append(make_job(conn, "emails", "dead", last_error="SMTPServerDisconnected: Connection unexpectedly closed"))
    log_in(page, console)
    page.goto(console.url + "/dead/")
    page.wait_for_selector("#dead-groups")
    save_screenshot(page, "dead-letters.png", tmp_path)

    page.click("#dead-groups a:has-text('TimeoutError: upstream took longer than 30s')")
    page.wait_for_selector(f"tr[data-job-id='{timeouts[0]}']")
    assert page.locator(f"tr[data-job-id='{others[0]}']").count() == 0
    page.click("button:has-text('Purge all matching')")
    page.wait_for_selector("h1:has-text('Purge 6 jobs?')")
    assert scalar(conn, "SELECT count(*) FROM jobs") == 9  # nothing happens before the confirmation
    page.click("button:has-text('Yes, purge 6 jobs')")
    page.wait_for_selector("text=Purged 6 job(s) matching the filter.")
    assert [status_of(conn, j) for j in timeouts] == [None] * 6
    assert [status_of(conn, j) for j in others] == ["dead"] * 3


def test_pause_a_queue_and_the_worker_stops_taking_its_jobs(page, console, conn, spawn_worker):
    spawn_worker(SKIPLOCK_POLL_INTERVAL="0.2")
    # the worker serving t3 makes it a queue the console knows (a queue nobody knows is not paused)
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM workers") >= 1, timeout=30, message="worker registered")
    log_in(page, console)
    page.goto(console.url + "/queues/t3")
    page.click("button:has-text('Pause queue')")
    # the confirmation says what a pause does; nothing is paused until it is confirmed (issue 36)
    page.wait_for_selector("[data-confirm=pause]")
    assert scalar(conn, "SELECT count(*) FROM paused_queues WHERE queue = 't3'") == 0
    page.click("button:has-text('Yes, pause t3')")
    page.wait_for_selector("text=Queue t3 paused")
    assert scalar(conn, "SELECT count(*) FROM paused_queues WHERE queue = 't3'") == 1
    paused_jobs = [enqueue("t3", {"n": i}) for i in range(5)]
    # t4 jobs enqueued after them are done: the worker is claiming, and skipped t3 meanwhile
    probe = [enqueue("t4", {"n": i}) for i in range(5)]
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = ANY(%s)", (probe,)) == 5,
             timeout=30, message="the worker to run the unpaused queue")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM workers") >= 1, timeout=30, message="worker registered")
    # a second probe after a full poll cycle: still nothing of t3 was claimed
    probe2 = enqueue("t4", {"n": "again"})
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (probe2,)) == 1,
             timeout=30, message="the second probe")
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = ANY(%s) AND status = 'queued' AND attempts = 0",
                  (paused_jobs,)) == 5
    assert scalar(conn, "SELECT count(*) FROM test_effects WHERE queue = 't3'") == 0
    page.reload()
    assert re.search(r"Queue\s+t3\s+paused", page.inner_text("h1"))
    page.click("button:has-text('Resume queue')")
    page.click("button:has-text('Yes, resume t3')")  # resuming starts work: it asks first
    page.wait_for_selector("text=Queue t3 resumed.")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE queue = 't3'") == 5,
             timeout=30, message="the resumed queue to drain")


def test_a_script_payload_shows_as_text_and_runs_nothing(page, console, conn):
    evil = "<script>window.__pwned = 1; alert('pwned')</script><img src=x onerror=\"window.__pwned=2\">"
    job = make_job(conn, "t1", "dead", payload={"comment": evil}, last_error=evil, unique_key=evil)
    make_job(conn, "t1", "queued", payload={"comment": evil})
    _fail_on_dialog(page)
    log_in(page, console)
    for path in ("/", f"/jobs/{job}", "/dead/", "/queues/t1", "/queues/t1?status=dead"):
        page.goto(console.url + path)
        page.wait_for_load_state("load")
        assert page.evaluate("window.__pwned") is None, path
    page.goto(console.url + f"/jobs/{job}")
    assert "<script>window.__pwned = 1;" in page.inner_text("pre.payload")
    assert "<script>window.__pwned = 1;" in page.inner_text("pre.last-error")
    assert page.locator("pre.payload script, pre.payload img").count() == 0


def test_overview_refreshes_itself_under_the_csp(page, console, conn):
    problems: list[str] = []
    # the first visit's 401 (the login page) is expected; script errors and CSP violations are not
    page.on("console", lambda msg: problems.append(msg.text)
            if msg.type == "error" and not msg.text.startswith("Failed to load resource") else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    log_in(page, console)
    page.select_option("select[name=refresh]", "2")  # console.js submits the form on change
    page.wait_for_selector("#overview[hx-trigger='every 2s, poll-now']")
    make_job(conn, "live-queue", "queued")
    # no reload: htmx polls the fragment and swaps the new row in
    page.wait_for_selector("tr[data-queue=live-queue]", timeout=20_000)
    assert problems == []
    # polls are skipped while the tab is hidden, and one catches up as soon as it is visible again
    page.goto(console.url + "/prefs?refresh=0&next=/")
    page.wait_for_selector("#overview[hx-trigger='poll-now']")
    # htmx:beforeSend fires only for requests that were not cancelled
    page.evaluate("window.__sent = 0; document.addEventListener('htmx:beforeSend', () => { window.__sent += 1; })")
    page.evaluate("Object.defineProperty(document, 'hidden', {configurable: true, get: () => true})")
    page.evaluate("htmx.trigger(document.querySelector('#overview'), 'poll-now')")
    assert page.evaluate("window.__sent") == 0
    page.evaluate("Object.defineProperty(document, 'hidden', {configurable: true, get: () => false});"
                  "document.dispatchEvent(new Event('visibilitychange'))")
    page.wait_for_function("window.__sent === 1")
