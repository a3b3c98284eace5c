"""Shared fixtures: a real PostgreSQL, a migrated template database, worker subprocesses.

- `pg_admin_url` (session): a server we may create databases on (see tests/support/pgcluster.py).
- `template_url` (session): a database migrated from migrations/ plus the test-only table.
- `db_url` (function): the session's working database, emptied before each test; also set
  as DATABASE_URL so in-process producers use it.
- `fresh_db_url` (function): a private copy of the template, dropped after the test (for tests
  that change the schema, e.g. dropping an index).
- `spawn_worker`: starts real `python -m skiplock` processes; all are SIGKILLed at teardown.

Under pytest-xdist (addopts) every worker process has its own template and session databases (their
names carry the process id); the server is found, or a throwaway cluster started, once, by the
controlling process, before the workers start (pytest_configure), so they all use the one server.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

import psycopg
import pytest

from skiplock.core.plumbing.migrate import apply_migrations
from tests.support.pgcluster import ThrowawayCluster, find_server, shared_server, with_database
from tests.support.workers import REPO, WorkerProcess, WorkerSlots, worker_env

# Counts the run's connections on the test server and prints the peak (the suite's budget: 40).
pytest_plugins = ["tests.support.connection_budget"]

__all__ = ["REPO", "TEST_TABLES_SQL", "WorkerProcess", "worker_env"]  # tests import these from here too

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


_OWN_CLUSTER: list[ThrowawayCluster] = []  # the controlling process's throwaway cluster, if it made one


def pytest_configure(config: pytest.Config) -> None:
    """No server answers: start one throwaway cluster here, in the controlling process, and hand it to
    xdist's workers (they inherit DATABASE_URL), rather than one initdb per worker (a few seconds,
    spent even by a run of unit tests alone, on a machine without a server)."""
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    if shared_server() is None:
        try:
            cluster = ThrowawayCluster()
        except (OSError, RuntimeError, subprocess.SubprocessError):
            return  # no PostgreSQL binaries: the tests that need a server fail in pg_admin_url, saying so
        _OWN_CLUSTER.append(cluster)
        os.environ["DATABASE_URL"] = cluster.url


def pytest_unconfigure(config: pytest.Config) -> None:
    while _OWN_CLUSTER:
        _OWN_CLUSTER.pop().destroy()


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Give the process its environment back after each test. A variable a test set in os.environ
    itself (not through monkeypatch) outlived it, reaching every subprocess that later tests of the
    same xdist process started: DJANGO_SETTINGS_MODULE once made installed workers try to set Django up."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """Give the root logger back its handlers and level after each test. A test that runs a CLI
    command in this process (`skiplock web`, `skiplock worker`) has it call configure_logging(),
    which puts in a StreamHandler on the sys.stderr of that moment: pytest's capture stream. Left
    there, every later record went to that stream, and once pytest had closed it each one printed
    "--- Logging error --- ... ValueError: I/O operation on closed file" at the end of the run."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


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
    name, url = _clone(pg_admin_url, template_url, "skiplock_session")
    yield url
    _drop(pg_admin_url, name)


def _user_tables(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
        "AND tablename NOT IN ('skiplock_migrations', 'skiplock_definitions')"
    ).fetchall()
    return [r[0] for r in rows]


def empty_database(url: str) -> None:
    """End every other session on `url`'s database and empty its tables (the next test starts clean)."""
    with _admin(url) as conn:
        # leftovers of an earlier test's workers must not touch this test's rows
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        tables = _user_tables(conn)
        if tables:
            conn.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " RESTART IDENTITY CASCADE")


@pytest.fixture(scope="session")
def own_server_db() -> Iterator[str]:
    """A migrated database on a throwaway cluster of this pytest process, started at its first use.

    For the tests that hold more connections than the shared server's budget lets one test hold
    (marked `own_server`, and every fault scenario): their connections are not on the shared server."""
    cluster = ThrowawayCluster()
    try:
        yield cluster.migrated_database("skiplock_own", TEST_TABLES_SQL)
    finally:
        cluster.destroy()


def _on_own_server(request: pytest.FixtureRequest) -> bool:
    """Tests that run worker processes (each 6-20 connections: its pools, its listener, its handlers'
    own connections) or are marked `own_server` use this process's throwaway cluster: the shared
    server then holds only in-process tests' few connections, within the budget, and no test waits
    for another's worker slot."""
    return "spawn_worker" in request.fixturenames or request.node.get_closest_marker("own_server") is not None


def _server(url: str) -> tuple[str, str]:
    params = psycopg.conninfo.conninfo_to_dict(url)
    return str(params.get("host", "")), str(params.get("port", "5432"))


@pytest.fixture
def db_url(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # the fixture is named by the test's marker, so a test on the shared server starts no cluster
    url = request.getfixturevalue("own_server_db" if _on_own_server(request) else "session_db")
    empty_database(url)
    monkeypatch.setenv("DATABASE_URL", url)
    yield url
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


# Tests running worker processes on the shared server at once, across xdist's processes (WorkerSlots).
WORKER_TEST_SLOTS = 2


@pytest.fixture(scope="session")
def worker_slots(tmp_path_factory: pytest.TempPathFactory) -> WorkerSlots | None:
    """The run's shared slots; None where a test's workers use a server of its own (tests/fault)."""
    base = tmp_path_factory.getbasetemp()
    # under xdist each process has basetemp/popen-gwN: the slots live one level up, shared by all
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return WorkerSlots(shared / "skiplock-worker-slots", WORKER_TEST_SLOTS)


@pytest.fixture
def spawn_worker(request: pytest.FixtureRequest, db_url: str, tmp_path: Path,
                 worker_slots: WorkerSlots | None) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []
    held: list[TextIO] = []  # the slot, taken at the first spawn: a test that spawns none waits for none
    own_server = _on_own_server(request)

    def spawn(*args: str, url: str | None = None, **settings: str) -> WorkerProcess:
        # a slot rations the shared server: a worker on this process's own cluster needs none
        on_shared = not own_server or (url is not None and _server(url) != _server(db_url))
        if worker_slots is not None and on_shared and not held:
            held.append(worker_slots.acquire())
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
    for slot in held:
        slot.close()


# The folders whose tests may be fast: no browser, no fault scenario, no benchmark.
FAST_KINDS = ("tests/unit/", "tests/integration/", "tests/console/")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: `-m fast` must see the marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the edit-test loop's subset `fast` (`python -m pytest -m fast`): the unit, integration and
    console tests not marked slow (those start several worker processes, or build and install the wheel)
    and that start no worker process (`spawn_worker`: each waits seconds for a real worker's start,
    heartbeats and stop; the full run has them, as do the fault scenarios).

    Browser tests run last. Playwright's sync API keeps an event loop running in the main thread
    from the first browser test until the session ends, and then asyncio.run() and Django's
    async-safety check refuse to run in any later test (async producers, Django conn=). Under
    pytest-xdist each worker gets the tests in this order too, so there as well they come last."""
    for item in items:
        path = item.nodeid.replace("\\", "/")
        if (path.startswith(FAST_KINDS) and item.get_closest_marker("slow") is None
                and "spawn_worker" not in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.fast)
    items.sort(key=_drives_a_browser)


def _drives_a_browser(item: pytest.Item) -> bool:
    """A test that starts Playwright: everything under tests/browser, and any other test that takes a
    Playwright fixture (pytest-playwright adds `browser_name` to each; the docs examples that render a
    page are such tests)."""
    return (item.nodeid.replace("\\", "/").startswith("tests/browser/")
            or "browser_name" in getattr(item, "fixturenames", ()))


@pytest.fixture(autouse=True)
def _no_event_loop_left_running_by_playwright(request: pytest.FixtureRequest) -> Iterator[None]:
    """Playwright's sync API leaves its event loop marked as running in the main thread from the first
    browser test of a process until the session ends; then asyncio.run() and Django's async-safety check
    refuse to run in any later test of that process (async producers, Django conn=). Sorting browser
    tests last is not enough under pytest-xdist. The loop runs nothing while a test that does not use
    the browser executes, so for such a test the mark is cleared, and put back after it."""
    running = asyncio._get_running_loop()
    if running is None or _drives_a_browser(request.node):
        yield
        return
    asyncio._set_running_loop(None)
    try:
        yield
    finally:
        asyncio._set_running_loop(running)
