"""The suite's connection budget: how many connections it holds on the test server at once.

A pytest plugin (loaded by addopts' `-p tests.support.connection_budget`). In the controlling process
(the one that starts pytest-xdist's workers) a thread counts, every 0.1 s, the client connections on the
server of DATABASE_URL (every database, all but its own). At the end it prints the peak and the tests
that were running at that moment. On a server that other clients share the count includes theirs: the
figure is the suite's own on a server it has alone (a private cluster, or CI's). With
--enforce-connection-budget a peak over the budget fails the run.

Why a budget: the server may be shared (CI's, a developer's); with max_connections=100 and other
clients on it, a suite holding 55 connections at once failed with "too many clients already".
A test that needs more (several worker processes, each with its pools and listener) starts its own
throwaway cluster (the `own_cluster_url` fixture); its connections are not on this server and not counted.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

BUDGET = 40  # connections to DATABASE_URL's server at any moment (docs/reference/testing-the-project.md)
SAMPLER_APPLICATION = "skiplock-tests-budget"
INTERVAL = 0.1
TOP = 15
# A peak over budget fails the run only when asked: on a shared server others' connections count too.
# (An option, not an environment variable: skiplock refuses SKIPLOCK_* names it does not know.)
ENFORCE = "--enforce-connection-budget"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(ENFORCE, action="store_true", help=f"fail the run if the connections on the test "
                     f"server passed {BUDGET} at any moment (tests/support/connection_budget.py)")


COUNT = """
SELECT coalesce(datname, '-'), count(*) FROM pg_stat_activity
 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
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
                if count > self.peak:
                    self.peak, self.peak_tests = count, sorted(self.running)
                    self.peak_databases = per_database


_sampler: Sampler | None = None


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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _sampler is not None and _sampler.peak > BUDGET and session.config.getoption(ENFORCE):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
