"""Screenshots of every console page at 1440 and 390 px wide, from a real run (not a test: run it by hand).

    python tests/benchmarks/console_screenshots.py [--admin-url postgresql://postgres@127.0.0.1:5432/postgres]
                                                   [--out docs/img]

Builds a scratch database, then lets real worker processes make the data an on-call operator meets:
dead letters of several error groups (tests/support/failing_handlers.py), orders that fail at a rate
that changes minute by minute for five minutes (the queue's failure-rate chart), a dead order retried
three times (its timeline), a recurring schedule that fires every second and one whose every run dies,
jobs that run for minutes, a queue no worker serves, a job scheduled for later, a workflow with a batch
(tests/support/workflow_handlers.py: one child dies, the clean-up runs anyway, its last step waits on a
queue nobody serves), and a worker SIGKILLed while it held jobs (its jobs show as orphaned).
Everything is enqueued through the public API and run by `python -m skiplock` processes.
The console runs under gunicorn and Chromium (Debian's, through Playwright) saves
docs/img/console-<page>-<width>.png for each page (PAGES below), after checking that no page is
wider than the window (nothing cut at 390 px). The workers are killed and the database dropped at
the end. It takes about seven minutes, most of it waiting for the delayed orders to come due.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psycopg

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from skiplock.core.plumbing.migrate import apply_migrations  # noqa: E402
from tests.conftest import TEST_TABLES_SQL  # noqa: E402

DB = "skiplock_console_screens"
USER, PASSWORD = "operator", "screenshot-password"
WIDTHS = ((1440, 900), (390, 844))
# Rounds of orders, one a minute from now: round k fails FAILING[k] of ORDERS_PER_ROUND orders, so the
# failure-rate chart's bars differ from minute to minute, as a flaky upstream makes them.
ORDERS_PER_ROUND, FAILING = 30, (3, 9, 1, 15, 6)


def _url(admin_url: str, name: str) -> str:
    return psycopg.conninfo.make_conninfo(admin_url, dbname=name)


def _wait(check: Callable[[], Any], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def _scalar(url: str, sql: str) -> Any:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql).fetchone()
        return row[0] if row else None


def _worker(url: str, log: Path, **settings: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_")}
    env.update({"DATABASE_URL": url, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **settings})
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "skiplock"], cwd=REPO, env=env, stdout=out,
                                stderr=subprocess.STDOUT)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_data(url: str, logs: Path) -> list[subprocess.Popen[bytes]]:
    """Real workers make every state the pages show; returns the processes still running."""
    os.environ["DATABASE_URL"] = url
    from skiplock import enqueue, enqueue_many

    orders = []
    for n in range(60):
        kind = ("customer", "connection", "key", "value", "chained", "missing")[n % 6]
        orders.append({"queue": "orders", "max_attempts": 1,
                       "payload": {"kind": kind, "order": 18000 + n * 37, "field": ("email", "phone")[n % 2]}})
    enqueue_many(orders)
    for k, failing in enumerate(FAILING):  # later rounds: their runs fall in later minutes
        enqueue_many([{"queue": "orders", "max_attempts": 1, "delay": 60 * (k + 1),
                       "payload": {"kind": "connection" if n < failing else "paid", "order": 20000 + k * 100 + n}}
                      for n in range(ORDERS_PER_ROUND)])
    # an order whose upstream stays down: three attempts, then dead (the job page's timeline)
    enqueue("orders", {"kind": "connection", "order": 4242, "customer": "cus_4242", "email": "ada@example.com"},
            max_attempts=3)
    workflow = make_workflow()
    # no_effect: the handlers' test_effects table is the test suite's, not in this database
    # tests.support.handlers serves t1..t4, default, slow and fast; runs of varied length feed Run times
    enqueue_many([("fast", {"n": n, "sleep": 0.02 * (n % 7), "no_effect": True}) for n in range(300)])
    enqueue_many([("t4", {"n": n, "sleep": 0.3, "no_effect": True}) for n in range(12)])
    tasks = "tests.support.handlers,tests.support.failing_handlers,tests.support.recurring_handlers," \
            "tests.support.recurring_dying,tests.support.workflow_handlers"
    # a short backoff: the three-attempt order dies within seconds instead of minutes
    steady = _worker(url, logs / "worker-a.log", SKIPLOCK_TASKS=tasks, SKIPLOCK_CONCURRENCY="8",
                     SKIPLOCK_BACKOFF_BASE="0.5", SKIPLOCK_BACKOFF_CAP="2",
                     SKIPLOCK_QUEUES="orders,t1,t4,rtick,rdie,fast,wf_line,wf_boom,wf_cleanup,wf_callback")
    _wait(lambda: _scalar(url, "SELECT count(*) FROM jobs WHERE queue = 'orders' AND status = 'dead'") >= 61,
          "the dead letters")
    _wait(lambda: _scalar(url, f"SELECT status::text FROM jobs WHERE id = {workflow['cleanup']}") is None
          or _scalar(url, f"SELECT status::text FROM jobs WHERE id = {workflow['cleanup']}") == "succeeded",
          "the workflow's clean-up")
    enqueue_many([("fast", {"n": n, "no_effect": True}) for n in range(400)])
    enqueue_many([("t1", {"sleep_after": 900, "n": n, "no_effect": True}) for n in range(3)])
    enqueue("t1", {"sleep_after": 900, "n": 9, "no_effect": True}, lock_key="account-7", tenant="acme")
    # a worker that dies holding jobs: SIGKILL, then its heartbeat ages past "live"
    doomed = _worker(url, logs / "worker-b.log", SKIPLOCK_TASKS="tests.support.handlers", SKIPLOCK_QUEUES="slow",
                     SKIPLOCK_LEASE_SECONDS="900")
    enqueue_many([("slow", {"sleep": 900, "n": n, "no_effect": True}) for n in range(3)])
    _wait(lambda: _scalar(url, "SELECT count(*) FROM jobs WHERE queue = 'slow' AND status = 'running'") == 3,
          "the doomed worker's jobs")
    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE workers SET last_seen = last_seen - interval '60 seconds' WHERE NOT (queues && "
                     "ARRAY['orders'])")
    enqueue_many([("t2", {"n": n}) for n in range(25)])  # nobody serves t2
    enqueue("t3", {"n": 1}, delay=3600)
    _wait(lambda: _scalar(url, "SELECT count(*) FROM jobs WHERE queue = 'rdie' AND status = 'dead'") >= 3,
          "the dying schedule's dead runs")
    _wait(lambda: _scalar(url, "SELECT coalesce(sum(total), 0) FROM job_runtimes") >= 700, "run times")
    rounds = len(FAILING) * ORDERS_PER_ROUND
    _wait(lambda: _scalar(url, "SELECT count(*) FROM jobs WHERE queue = 'orders' AND status = 'queued'") == 0
          and _scalar(url, "SELECT coalesce(sum(completed + dead), 0) FROM job_stats WHERE queue = 'orders'")
          >= 61 + rounds, "the delayed rounds of orders", timeout=60 * (len(FAILING) + 3))
    return [steady]


def make_workflow() -> dict[str, int]:
    """An import as a workflow, through the public API: a root, a batch of 8 lines and one child that
    dies, a clean-up that runs whatever its parents did, and a report on a queue nobody serves (t2),
    so the DAG holds succeeded, dead and ready jobs. Returns the ids the pages are shot on."""
    import skiplock

    root = skiplock.enqueue("wf_line", {"n": 0, "file": "customers-2026-11.csv"})
    with skiplock.batch(on_complete=("wf_callback", {"import": "customers-2026-11.csv"})) as b:
        kids = b.enqueue_many([{"queue": "wf_line", "payload": {"n": i}, "depends_on": [root]} for i in range(1, 9)]
                              # max_attempts: the task's default is not known before a worker has started
                              + [{"queue": "wf_boom", "payload": {"n": 9}, "depends_on": [root], "max_attempts": 1}])
    cleanup = skiplock.enqueue("wf_cleanup", {"file": "customers-2026-11.csv"}, depends_on=kids,
                               on_dependency_failure="run")
    skiplock.enqueue("t2", {"report": "customers-2026-11"}, depends_on=[cleanup])
    return {"root": root, "batch": b.id, "cleanup": cleanup}


def shoot(url: str, out: Path, logs: Path) -> None:
    from playwright.sync_api import sync_playwright

    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_")}
    env.update({"DATABASE_URL": url, "SKIPLOCK_WEB_USER": USER, "SKIPLOCK_WEB_PASSWORD": PASSWORD,
                "SKIPLOCK_SECRET_KEY": "screenshots", "PYTHONPATH": str(REPO)})
    with open(logs / "gunicorn.log", "ab") as log:
        web = subprocess.Popen([sys.executable, "-m", "gunicorn", "skiplock.webapp:create_app()", "--workers", "1",
                                "--threads", "4", "--bind", f"127.0.0.1:{port}"], cwd=REPO, env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=2):
                return True
        except OSError:
            return False

    try:
        _wait(up, "gunicorn")
        pages = page_paths(url)
        out.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            for width, height in WIDTHS:  # the login page, before there is a session
                page.set_viewport_size({"width": width, "height": height})
                page.goto(base + "/login")
                _save(page, out / f"console-login-{width}.png")
            page.fill("input[name=user]", USER)
            page.fill("input[name=password]", PASSWORD)
            page.click("form[action='/login'] button[type=submit]")
            page.wait_for_selector("main")
            page.goto(base + "/prefs?refresh=0&next=/")  # still pictures: no refresh mid-shot
            for width, height in WIDTHS:
                page.set_viewport_size({"width": width, "height": height})
                for name, (path, ready) in pages.items():
                    page.goto(base + path)
                    page.wait_for_selector(ready)
                    page.wait_for_load_state("networkidle")  # htmx fragments (the "What changed?" line)
                    _save(page, out / f"console-{name}-{width}.png")
            browser.close()
    finally:
        web.terminate()
        web.wait(timeout=30)


def page_paths(url: str) -> dict[str, tuple[str, str]]:
    """Every console page: name -> (path, a selector that is there once the page shows its data)."""
    dead_job = _scalar(url, "SELECT id FROM jobs WHERE queue = 'orders' AND status = 'dead' "
                            "AND payload->>'customer' = 'cus_4242'")
    running_job = _scalar(url, "SELECT id FROM jobs WHERE lock_key = 'account-7'")
    root = _scalar(url, "SELECT min(workflow_id) FROM jobs WHERE queue = 't2' AND workflow_id IS NOT NULL")
    batch = _scalar(url, "SELECT min(batch_id) FROM jobs WHERE batch_id IS NOT NULL")
    search = "/search/?" + urlencode({"queue": "orders", "state": "dead", "path": "kind", "value": '"customer"'})
    return {
        "overview": ("/", "main"),
        "changed": ("/changed/", "main"),
        "queue": ("/queues/t2", "main"),
        # the failures of the orders' rounds, minute by minute
        "queue-failures": ("/queues/orders?status=dead", "#failure-rate svg"),
        "job-dead": (f"/jobs/{dead_job}?edit=1#edit-retry", "ol.timeline"),
        "job-running": (f"/jobs/{running_job}", "main"),
        "running": ("/running/", "main"),
        "runtimes": ("/runtimes/", "main"),
        "dead": ("/dead/?window=all", "main"),
        "search": (search, "main table"),
        "workers": ("/workers/", "main"),
        "recurring": ("/recurring/", "main"),
        "workflows": ("/workflows/", "main table"),
        "workflow": (f"/workflows/{root}", "main svg"),
        "batch": (f"/batches/{batch}", "main"),
        "health": ("/health", "main"),
        "audit": ("/audit/", "main"),
    }


def _save(page: Any, target: Path) -> None:
    """A full-page screenshot, refused when the page is wider than the window (cut on a phone)."""
    width = page.viewport_size["width"]
    scroll = page.evaluate("document.documentElement.scrollWidth")
    if scroll > width:
        raise SystemExit(f"{page.url}: {scroll} px wide in a {width} px window")
    page.screenshot(path=str(target), full_page=True)
    print(target.relative_to(REPO) if target.is_relative_to(REPO) else target, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", default=os.environ.get("DATABASE_URL",
                                                              "postgresql://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--out", default=str(REPO / "docs" / "img"))
    args = parser.parse_args()
    logs = Path("/tmp") / f"skiplock-screens-{os.getpid()}"
    logs.mkdir(parents=True, exist_ok=True)
    with psycopg.connect(args.admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{DB}"')
    url = _url(args.admin_url, DB)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        apply_migrations(url)
        with psycopg.connect(url, autocommit=True) as conn:
            # the table tests.support.handlers records its runs in (the recurring 'tick' writes to it)
            conn.execute(TEST_TABLES_SQL)
        workers = make_data(url, logs)
        shoot(url, Path(args.out), logs)
    finally:
        for proc in workers:
            proc.kill()
            proc.wait()
        with psycopg.connect(args.admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        print(f"worker and web logs: {logs}")


if __name__ == "__main__":
    main()
