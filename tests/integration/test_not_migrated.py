"""A process on a database that is not (fully) migrated: it waits for a migration running beside it,
or stops with one line; the console answers 503 "not migrated" on /healthz and on its pages, not 500.

The half-migrated database is the one a Procfile's `release:` line leaves while it runs: the jobs
table is there, task_defaults (migration 027) not yet.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from skiplock.core.plumbing.migrate import MIGRATION_LOCK_KEY, discover
from skiplock.webapp import create_app
from skiplock.webapp.db import close_app
from skiplock.webapp.settings import Account
from tests.conftest import REPO

TASK_DEFAULTS = next(m for m in discover() if m.name == "task_defaults")


def unmigrate_task_defaults(url: str) -> None:
    """Undo migration 027 (its table and its record), as if `skiplock migrate` had not reached it yet."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE task_defaults")
        conn.execute("DELETE FROM skiplock_migrations WHERE version = %s", (TASK_DEFAULTS.version,))


def remigrate_task_defaults(conn: psycopg.Connection) -> None:
    conn.execute(TASK_DEFAULTS.sql)
    conn.execute("INSERT INTO skiplock_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                 (TASK_DEFAULTS.version, TASK_DEFAULTS.name, TASK_DEFAULTS.checksum))


def start_worker(url: str, log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "skiplock", "--tasks", "tests.support.handlers"], cwd=REPO,
                            env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, text=True)


def wait_for_line(log: Path, text: str, proc: subprocess.Popen[str], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while text not in log.read_text():
        assert time.monotonic() < deadline, f"no {text!r} in:\n{log.read_text()}"
        assert proc.poll() is None, f"the worker exited ({proc.returncode}):\n{log.read_text()}"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_worker_on_a_half_migrated_database_stops_with_one_line(fresh_db_url: str, tmp_path: Path) -> None:
    unmigrate_task_defaults(fresh_db_url)
    log = tmp_path / "worker.log"
    proc = start_worker(fresh_db_url, log)
    assert proc.wait(timeout=120) == 2, log.read_text()
    out = log.read_text()
    assert "Traceback" not in out, out
    errors = [line for line in out.splitlines() if "error" in line]
    assert errors == [f"skiplock: error: the database is not migrated (1 of {len(discover())} migrations missing, "
                      f"from {TASK_DEFAULTS.version}): run `skiplock migrate` first"], out


@pytest.mark.slow
def test_a_worker_started_during_a_migration_waits_for_it(fresh_db_url: str, tmp_path: Path) -> None:
    unmigrate_task_defaults(fresh_db_url)
    log = tmp_path / "worker.log"
    with psycopg.connect(fresh_db_url, autocommit=True) as migrating:
        migrating.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))  # `skiplock migrate` running
        proc = start_worker(fresh_db_url, log)
        try:
            wait_for_line(log, "being migrated by another process; waiting for it to finish", proc)
            assert "starting" not in log.read_text()
            remigrate_task_defaults(migrating)
            migrating.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
            wait_for_line(log, "starting: queues=", proc)  # the worker goes on once the migration is done
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    assert proc.returncode == 0, log.read_text()
    assert "Traceback" not in log.read_text()


def test_the_console_says_not_migrated_on_health_and_pages(fresh_db_url: str) -> None:
    unmigrate_task_defaults(fresh_db_url)
    app = create_app({"TESTING": True, "DATABASE_URL": fresh_db_url, "AUTH": True, "SECRET_KEY": "k",
                      "ACCOUNTS": [Account("admin", "admin", password="pw")]})
    try:
        client = app.test_client()
        health = client.get("/healthz")
        assert health.status_code == 503 and health.data == b"not migrated: run `skiplock migrate`\n"
        with psycopg.connect(fresh_db_url, autocommit=True) as conn:
            conn.execute("DROP TABLE jobs CASCADE")  # every page reads jobs
        login = {"Authorization": "Basic " + base64.b64encode(b"admin:pw").decode()}
        page = client.get("/", headers=login)
        assert page.status_code == 503, page.data[:300]
        assert b"The database is not migrated: run `skiplock migrate`" in page.data
        with psycopg.connect(fresh_db_url, autocommit=True) as conn:
            remigrate_task_defaults(conn)
    finally:
        close_app(app)
