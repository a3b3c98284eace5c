"""Shared fixtures: a real PostgreSQL, a migrated template database, worker subprocesses.

- `pg_admin_url` (session): a server we may create databases on (see tests/support/pgcluster.py).
- `template_url` (session): a database migrated from migrations/ plus the test-only table.
- `db_url` (function): the session's working database, emptied before each test; also set
  as DATABASE_URL so in-process producers use it.
- `fresh_db_url` (function): a private copy of the template, dropped after the test (for tests
  that change the schema, e.g. dropping an index).
- `spawn_worker`: starts real `python -m skiplock` processes; all are SIGKILLed at teardown.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from skiplock.core.migrate import apply_migrations
from tests.support.pgcluster import find_server, with_database

REPO = Path(__file__).resolve().parent.parent

TEST_TABLES_SQL = """
CREATE TABLE IF NOT EXISTS test_effects (
    job_id  bigint      NOT NULL,
    queue   text        NOT NULL,
    attempt int         NOT NULL,
    pid     int         NOT NULL,
    payload jsonb,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""


def _admin(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True)


def _drop(admin_url: str, name: str) -> None:
    with _admin(admin_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    url, cluster = find_server()
    yield url
    if cluster is not None:
        cluster.destroy()


@pytest.fixture(scope="session")
def template_url(pg_admin_url: str) -> Iterator[str]:
    name = f"skiplock_tmpl_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with _admin(pg_admin_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = with_database(pg_admin_url, name)
    apply_migrations(url)
    with _admin(url) as conn:
        conn.execute(TEST_TABLES_SQL)
    yield url
    _drop(pg_admin_url, name)


def _clone(pg_admin_url: str, template_url: str, prefix: str) -> tuple[str, str]:
    template = psycopg.conninfo.conninfo_to_dict(template_url)["dbname"]
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with _admin(pg_admin_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return name, with_database(pg_admin_url, name)


@pytest.fixture(scope="session")
def session_db(pg_admin_url: str, template_url: str) -> Iterator[str]:
    name, url = _clone(pg_admin_url, template_url, "skiplock_test")
    yield url
    _drop(pg_admin_url, name)


def _user_tables(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'skiplock_migrations'"
    ).fetchall()
    return [r[0] for r in rows]


@pytest.fixture
def db_url(session_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with _admin(session_db) as conn:
        # leftovers of an earlier test's workers must not touch this test's rows
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        tables = _user_tables(conn)
        if tables:
            conn.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " RESTART IDENTITY CASCADE")
    monkeypatch.setenv("DATABASE_URL", session_db)
    yield session_db
    from skiplock.core.producer import close_default_pool

    close_default_pool()


@pytest.fixture
def fresh_db_url(pg_admin_url: str, template_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name, url = _clone(pg_admin_url, template_url, "skiplock_fresh")
    monkeypatch.setenv("DATABASE_URL", url)
    yield url
    from skiplock.core.producer import close_default_pool

    close_default_pool()
    _drop(pg_admin_url, name)


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_url, autocommit=True) as c:
        yield c


class WorkerProcess:
    """A real `python -m skiplock` subprocess with its log in a file."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        self.proc = proc
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no cleanup, no release; exactly a crash."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM and wait for exit; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)


def worker_env(db_url: str, **settings: str) -> dict[str, str]:
    """Environment for a worker subprocess against `db_url`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIPLOCK_")}
    env.update({"DATABASE_URL": db_url, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1",
                "SKIPLOCK_TASKS": "tests.support.handlers"})
    env.update(settings)
    return env


@pytest.fixture
def spawn_worker(db_url: str, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def spawn(*args: str, url: str | None = None, **settings: str) -> WorkerProcess:
        log_path = tmp_path / f"worker-{len(started)}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "skiplock", *args], cwd=REPO,
                                    env=worker_env(url or db_url, **settings), stdout=log,
                                    stderr=subprocess.STDOUT)
        wp = WorkerProcess(proc, log_path)
        started.append(wp)
        return wp

    yield spawn
    for wp in started:
        wp.kill()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests run last. Playwright's sync API keeps an event loop running in the main thread
    from the first browser test until the session ends, and then asyncio.run() and Django's
    async-safety check refuse to run in any later test (async producers, Django conn=)."""
    items.sort(key=lambda item: item.nodeid.replace("\\", "/").startswith("tests/browser/"))
