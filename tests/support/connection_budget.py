"""The suite's connection budget: how many connections it holds on the test server at once.

A pytest plugin (loaded by addopts' `-p tests.support.connection_budget`). In the controlling process
(the one that starts pytest-xdist's workers) a thread counts, every 0.1 s, the client connections on the
server of DATABASE_URL (this run's databases, all named skiplock_*). At the end it prints the peak, the
tests that were running at that moment, and the tests that held the most connections themselves. A peak
over the budget fails the run (--connection-budget-report-only only reports it).

Why a budget: the server may be shared (CI's, a developer's); with max_connections=100 and other
clients on it, a suite holding 55 connections at once failed with "too many clients already".
A test that needs more (worker processes, each with its pools and listener) runs on a throwaway cluster
of its pytest process (tests/conftest.py: every test that asks for `spawn_worker`, and those marked
`own_server`); its connections are not on this server and not counted.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

BUDGET = 40  # connections to DATABASE_URL's server at any moment (docs/reference/testing-the-project.md)
SAMPLER_APPLICATION = "skiplock-tests-budget"
INTERVAL = 0.1
TOP = 15
# A peak over the budget fails the run (`python -m pytest`, and so CI), unless this option says only to
# report it. (An option, not an environment variable: skiplock refuses SKIPLOCK_* names it does not know.)
REPORT_ONLY = "--connection-budget-report-only"
# Each test process writes the test it is running into <dir>/<pid>, so that the controller can charge a
# database's connections to the test that made them: the test databases' names carry the pid of the
# process that made them (skiplock_session_<pid>_..., skiplock_fresh_<pid>_..., skiplock_pkg_<pid>_...).
RUNNING_DIR = "TESTS_CONNECTION_BUDGET_DIR"  # not SKIPLOCK_*: skiplock refuses SKIPLOCK_* names it does not know
_PID_IN_NAME = re.compile(r"_(\d{2,})(?:_|$)")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(REPORT_ONLY, action="store_true", help=f"only report it when this run's connections on "
                     f"the test server passed {BUDGET} at some moment; by default that fails the run "
                     "(tests/support/connection_budget.py)")


# This run's connections: every database the suite makes is named skiplock_* (session, template, fresh,
# package, Procfile, the bench command's own). Other clients of a shared server are not counted, so the
# budget can be enforced there too; the suite's short admin connections to `postgres` are not counted.
COUNT = """
SELECT datname, count(*) FROM pg_stat_activity
 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname LIKE 'skiplock%'
 GROUP BY 1
"""


class Sampler:
    """Counts this run's connections on one server until stopped; keeps the peak and who ran then."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.peak = 0
        self.peak_tests: list[str] = []
        self.peak_databases: dict[str, int] = {}  # connections per database at the peak
        self.running: set[str] = set()
        self.per_test: dict[str, int] = {}  # the most seen while each test ran (with xdist: alongside others)
        self.own: dict[str, int] = {}  # the most seen on the databases of each test's own process: its own count
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="connection-budget", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        try:
            conn = psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5,
                                   application_name=SAMPLER_APPLICATION)
        except psycopg.Error:
            return  # no server yet (a throwaway cluster is being made): nothing of ours to count
        with conn:
            while not self._stop.wait(INTERVAL):
                try:
                    per_database = {name: int(n) for name, n in conn.execute(COUNT).fetchall()}
                except psycopg.Error:
                    return
                count = sum(per_database.values())
                self.samples += 1
                for nodeid in list(self.running):
                    self.per_test[nodeid] = max(count, self.per_test.get(nodeid, 0))
                self._charge(per_database)
                if count > self.peak:
                    self.peak, self.peak_tests = count, sorted(self.running)
                    self.peak_databases = per_database


    def _charge(self, per_database: dict[str, int]) -> None:
        """Add each database's connections to the test its process runs now (names carry the pid)."""
        running = _running_by_pid()
        own: dict[str, int] = {}
        for name, n in per_database.items():
            match = _PID_IN_NAME.search(name)
            nodeid = running.get(int(match.group(1))) if match else None
            if nodeid:
                own[nodeid] = own.get(nodeid, 0) + n
        for nodeid, n in own.items():
            self.own[nodeid] = max(n, self.own.get(nodeid, 0))


def _running_by_pid() -> dict[int, str]:
    folder = os.environ.get(RUNNING_DIR)
    if not folder:
        return {}
    running: dict[int, str] = {}
    for entry in Path(folder).iterdir():
        try:
            running[int(entry.name)] = entry.read_text()
        except (OSError, ValueError):
            continue  # being rewritten this instant: the next sample has it
    return running


def _note_running(nodeid: str) -> None:
    """In the process that runs tests: say which test runs now ('' between tests)."""
    folder = os.environ.get(RUNNING_DIR)
    if folder:
        Path(folder, str(os.getpid())).write_text(nodeid)


_sampler: Sampler | None = None


def pytest_configure(config: pytest.Config) -> None:
    # the controller makes the folder before xdist starts its workers: they inherit the variable
    if _is_controller(config) and RUNNING_DIR not in os.environ:
        os.environ[RUNNING_DIR] = tempfile.mkdtemp(prefix="skiplock-budget-")


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    """In the controlling process only: xdist's workers run the tests, the controller watches the server."""
    global _sampler
    if _is_controller(session.config) and _sampler is None and not session.config.option.collectonly:
        from tests.support.pgcluster import shared_server

        url = shared_server()
        if url is not None:  # else each process starts a private cluster: nothing shared to count
            _sampler = Sampler(url)
            _sampler.start()


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    if _sampler is not None:
        _sampler.running.add(nodeid)


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    if _sampler is not None:
        _sampler.running.discard(nodeid)


def pytest_runtest_setup(item: pytest.Item) -> None:
    _note_running(item.nodeid)  # in the process that runs it (an xdist worker, or the only process)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    _note_running(item.nodeid)  # teardown still holds the test's connections; cleared by the next setup


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if _sampler is None or not _sampler.samples:
        return
    _sampler.stop()
    over = _sampler.peak > BUDGET
    terminalreporter.section("connection budget")
    terminalreporter.write_line(f"peak connections on the test server: {_sampler.peak} (budget {BUDGET}, "
                                f"{_sampler.samples} samples every {INTERVAL} s)", red=over, green=not over)
    terminalreporter.write_line("  by database: " + ", ".join(
        f"{name} {n}" for name, n in sorted(_sampler.peak_databases.items(), key=lambda item: -item[1])))
    for nodeid in _sampler.peak_tests:
        terminalreporter.write_line(f"  running at the peak: {nodeid}")
    busiest = sorted(_sampler.per_test.items(), key=lambda item: -item[1])[:TOP]
    terminalreporter.write_line(f"the {len(busiest)} tests that ran at the highest counts:")
    for nodeid, count in busiest:
        terminalreporter.write_line(f"  {count:4d}  {nodeid}")
    heaviest = sorted(_sampler.own.items(), key=lambda item: -item[1])[:TOP]
    terminalreporter.write_line(f"the {len(heaviest)} tests that held the most connections themselves "
                                "(on their own process's databases):")
    for nodeid, count in heaviest:
        terminalreporter.write_line(f"  {count:4d}  {nodeid}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _sampler is not None and _sampler.peak > BUDGET and not session.config.getoption(REPORT_ONLY):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
