"""Make the documentation's console screenshots from a real run: `python -m tests.docs.screenshots`.

A scratch database on the server of DATABASE_URL (created and dropped here), the demo workload of
`skiplock dev` processed by a real worker process (jobs that succeed, retry, and one that ends dead),
the console under gunicorn as in production, and Debian's chromium driven by Playwright. Writes
docs/img/overview.png and docs/img/dead-letters.png, which README.md shows through the docs site.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg

from skiplock.core.plumbing.migrate import apply_migrations
from tests.support.pgcluster import find_server, with_database

REPO = Path(__file__).resolve().parent.parent.parent
OUT = REPO / "docs" / "img"
USER, PASSWORD = "admin", "screenshot-only"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(check: Callable[[], bool], what: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"screenshots: {what} did not happen within {seconds:g}s")
        time.sleep(0.2)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def main() -> int:
    admin_url, cluster = find_server()
    name = f"skiplock_shots_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = with_database(admin_url, name)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        apply_migrations(url)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_")}, "DATABASE_URL": url,
               "SKIPLOCK_WEB_USER": USER, "SKIPLOCK_WEB_PASSWORD": PASSWORD, "PYTHONPATH": str(REPO)}
        from skiplock.tools.demo_tasks import enqueue_demo

        os.environ["DATABASE_URL"] = url
        for _ in range(3):  # a few rounds, so the charts and counters have something to show
            enqueue_demo()
        procs.append(subprocess.Popen([sys.executable, "-m", "skiplock", "--tasks", "skiplock.tools.demo_tasks"],
                                      env={**env, "SKIPLOCK_BACKOFF_BASE": "0.2"}))
        with psycopg.connect(url, autocommit=True) as conn:
            # the worker has run the demo: only the delayed jobs and the retries' backoff remain
            _wait(lambda: (conn.execute("SELECT count(*) FROM jobs WHERE status = 'dead'").fetchone() or (0,))[0] >= 3,
                  "the demo's dead letters")
            _wait(lambda: conn.execute("SELECT count(*) FROM jobs WHERE status = 'queued' AND run_at <= now()")
                  .fetchone() == (0,), "the demo's ready jobs to drain")
        for _ in range(2):  # a backlog, so the overview shows ready and scheduled work
            enqueue_demo()
        port = _free_port()
        procs.append(subprocess.Popen([sys.executable, "-m", "gunicorn", "skiplock.webapp:create_app()",
                                       "--bind", f"127.0.0.1:{port}", "--worker-class", "gthread", "--threads", "4"],
                                      env=env))
        base = f"http://127.0.0.1:{port}"
        _wait(lambda: _answers(base + "/healthz"), "the console to answer")
        from playwright.sync_api import sync_playwright

        OUT.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 400}, device_scale_factor=1)
            page.goto(base + "/login")
            page.fill("input[name=user]", USER)
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.goto(base + "/")
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(OUT / "overview.png"), full_page=True)  # the content, not the window
            page.goto(base + "/dead/")
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(OUT / "dead-letters.png"), full_page=True)
            browser.close()
        print(f"wrote {OUT / 'overview.png'} and {OUT / 'dead-letters.png'}")
        return 0
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if cluster is not None:
            cluster.destroy()


if __name__ == "__main__":
    sys.exit(main())
