"""The Flask team's first day, end to end: `DATABASE_URL=... python check.py` (exit 0 when all holds).

1. skiplock's migrations; gunicorn serves app.py (its table is created at start-up);
2. an order that fails rolls back with no job, one that succeeds leaves one (Flask-SQLAlchemy's session);
3. a worker with the same models confirms the order, and a "cursed" order ends dead;
4. the console under /admin/jobs/, behind Flask-Login: bob may look, not act;
   alice retries the dead job, and the audit trail names her.
"""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import psycopg

HERE = Path(__file__).resolve().parent
LOGS = Path(os.environ.get("EXAMPLE_LOGS") or tempfile.mkdtemp(prefix="skiplock-example-"))  # web.log, worker.log
URL = os.environ["DATABASE_URL"]
ENV = {**os.environ, "PYTHONPATH": str(HERE), "PYTHONUNBUFFERED": "1"}


def wait_for(check, what: str, timeout: float = 60) -> None:
    """Poll `check` until true; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def scalar(sql: str, *args: object) -> object:
    with psycopg.connect(URL, autocommit=True) as conn:
        row = conn.execute(sql, args).fetchone()
        return row[0] if row else None


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class Client:
    """A cookie-keeping HTTP client that shows redirects instead of following them."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
                                                  NoRedirect)

    def request(self, path: str, data: dict[str, str] | None = None) -> tuple[int, Any, str]:
        """(status, headers (case-insensitive), body) of one request."""
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        req = urllib.request.Request(self.base + path, data=body, headers={"Referer": self.base + path})
        try:
            with self.opener.open(req, timeout=30) as resp:
                return resp.status, resp.headers, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.headers, err.read().decode()

    def login(self, user: str, password: str) -> None:
        status, headers, _ = self.request("/login", {"user": user, "password": password})
        assert status == 303 and headers["Location"] == "/admin/jobs/", (status, headers)


def console_token(html: str) -> str:
    token = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert token, "no CSRF token on the console page"
    return token.group(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(*cmd: str, log: str) -> subprocess.Popen[bytes]:
    with open(LOGS / log, "wb") as out:
        return subprocess.Popen(cmd, cwd=HERE, env=ENV, stdout=out, stderr=subprocess.STDOUT)


def served(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/admin/jobs/healthz", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # any HTTP answer means gunicorn is up
    except OSError:
        return False


def main() -> None:
    subprocess.run([sys.executable, "-m", "skiplock.tools.cli", "migrate"], cwd=HERE, env=ENV, check=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    web = start(sys.executable, "-m", "gunicorn", "app:create_app()", "--bind", f"127.0.0.1:{port}",
                "--threads", "4", log="web.log")
    worker = None
    try:
        wait_for(lambda: web.poll() is not None or served(base), "gunicorn")
        assert web.poll() is None, (LOGS / "web.log").read_text()
        shop = Client(base)
        # enqueue in the transaction: a rolled-back order leaves no job, a committed one leaves one
        assert shop.request("/orders", {"item": ""})[0] == 400
        assert scalar("SELECT count(*) FROM jobs") == 0 and scalar("SELECT count(*) FROM orders") == 0
        status, _, order_id = shop.request("/orders", {"item": "book"})
        assert status == 201, order_id
        assert scalar("SELECT count(*) FROM jobs WHERE queue = 'order-emails'") == 1

        # the worker uses the ORM
        worker = start(sys.executable, "-m", "skiplock.tools.cli", "worker", "--tasks", "tasks",
                       log="worker.log")
        wait_for(lambda: scalar("SELECT confirmed FROM orders WHERE id = %s", int(order_id)) is True,
                 "the worker to confirm the order")
        _, _, cursed = shop.request("/orders", {"item": "cursed"})
        wait_for(lambda: scalar("SELECT status::text FROM jobs WHERE payload->>'order_id' = %s", cursed) == "dead",
                 "the cursed order's job to die")
        job_id = scalar("SELECT id FROM jobs WHERE payload->>'order_id' = %s", cursed)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0

        # the console, behind Flask-Login
        assert Client(base).request("/admin/jobs/")[0] == 403  # not logged in to the app
        bob = Client(base)
        bob.login("bob", "bob-pw")
        status, headers, html = bob.request(f"/admin/jobs/jobs/{job_id}")
        assert status == 200 and "the mail server refused this order" in html
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        refused = bob.request(f"/admin/jobs/jobs/{job_id}/retry", {"csrf_token": console_token(html)})
        assert refused[0] == 403  # read-only
        alice = Client(base)
        alice.login("alice", "alice-pw")
        _, _, html = alice.request(f"/admin/jobs/jobs/{job_id}")
        assert alice.request(f"/admin/jobs/jobs/{job_id}/retry", {})[0] == 400  # no CSRF token
        status, headers, _ = alice.request(f"/admin/jobs/jobs/{job_id}/retry", {"csrf_token": console_token(html),
                                                                                 "confirm": "yes"})
        assert status == 303 and headers["Location"].startswith(f"/admin/jobs/jobs/{job_id}"), (status, headers)
        assert scalar("SELECT status::text FROM jobs WHERE id = %s", job_id) == "queued"
        assert scalar("SELECT actor FROM audit_log ORDER BY id DESC LIMIT 1") == "alice"
    finally:
        for proc in (worker, web):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
    print("flask example: all checks passed")


if __name__ == "__main__":
    main()
