"""Fixtures and helpers shared by the fault scenarios; prints every scenario's books at the end.

The scenarios run several worker processes at once (20-40 connections), more than the suite's
budget on the shared test server allows beside the other tests: so each pytest process runs them on
a throwaway cluster of its own (`fault_db`), started at its first fault test. Their `db_url` (and so
`conn` and `spawn_worker`) is that cluster's database, emptied before each test as elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.conftest import empty_database
from tests.fault.books import RESULTS
from tests.support.helpers import scalar, wait_for


@pytest.fixture(scope="session")
def fault_db(own_server_db: str) -> str:
    """A migrated database on this process's own cluster, for every fault scenario it runs."""
    return own_server_db


@pytest.fixture
def db_url(fault_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    empty_database(fault_db)
    monkeypatch.setenv("DATABASE_URL", fault_db)
    yield fault_db
    from skiplock.core.producer import close_default_pool

    close_default_pool()


@pytest.fixture(scope="session")
def worker_slots() -> None:
    """No slot to wait for: these workers' connections are on this process's own cluster."""
    return None

# Short leases and a fast reaper so crashed workers' jobs come back within seconds, not 30 s.
FAST_RECOVERY = {
    "SKIPLOCK_LEASE_SECONDS": "2",
    "SKIPLOCK_REAPER_INTERVAL": "0.5",
    "SKIPLOCK_POLL_INTERVAL": "0.5",
    "SKIPLOCK_BACKOFF_BASE": "0.1",
    "SKIPLOCK_BACKOFF_CAP": "1",
    "SKIPLOCK_SHUTDOWN_GRACE": "5",
}


def effects(conn: psycopg.Connection) -> int:
    """How many handler runs have recorded their effect so far."""
    return int(scalar(conn, "SELECT count(*) FROM test_effects"))


def running_of(conn: psycopg.Connection, pid: int) -> list[int]:
    """Ids of jobs still marked running by the worker process `pid` (worker_id is host:pid:random)."""
    rows = conn.execute("SELECT id FROM jobs WHERE status = 'running' AND worker_id LIKE %s",
                        (f"%:{pid}:%",)).fetchall()
    return [r[0] for r in rows]


def settle_killed(conn: psycopg.Connection, pid: int, timeout: float = 30.0) -> list[int]:
    """After SIGKILL of worker `pid`: wait until its server sessions are gone, then return the
    jobs it still holds. A statement the process sent just before dying (an ack) still commits on
    the server, so reading its jobs before its backends exit would count acked jobs as orphans.
    """
    rows = conn.execute("SELECT worker_id FROM jobs WHERE worker_id LIKE %(p)s UNION "
                        "SELECT id FROM workers WHERE pid = %(pid)s",
                        {"p": f"%:{pid}:%", "pid": pid}).fetchall()
    names = [f"skiplock-{kind} {r[0].rsplit(':', 1)[-1]}" for r in rows for kind in ("worker", "listener")]
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM pg_stat_activity WHERE application_name = ANY(%s)",
                            (names,)) == 0, timeout=timeout, message=f"worker {pid}'s sessions to end")
    return running_of(conn, pid)


def stop(worker: Any, conn: psycopg.Connection) -> int:
    """SIGTERM a worker once it has installed its signal handlers, and return its exit status.

    A replacement still importing would die of the signal itself (exit -15). Started means it
    logged 'starting' or registered its row in `workers` (with SKIPLOCK_LOG_LEVEL=WARNING there
    is no 'starting' line); both happen after the handlers are installed.
    """
    def started() -> bool:
        return ("starting" in worker.log() or worker.proc.poll() is not None
                or bool(scalar(conn, "SELECT count(*) FROM workers WHERE pid = %s", (worker.pid,))))

    wait_for(started, timeout=60, message="the worker to finish starting")
    return int(worker.terminate())


def remaining(conn: psycopg.Connection, statuses: tuple[str, ...] = ("queued", "running")) -> int:
    """Jobs still waiting or running."""
    return int(scalar(conn, "SELECT count(*) FROM jobs WHERE status = ANY(%s::job_status[])", (list(statuses),)))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the books of every fault scenario that ran: the figures for the report."""
    if not RESULTS:
        return
    terminalreporter.section("fault suite books")
    for result in RESULTS:
        extra = result.get("extra", {})
        figures = {k: v for k, v in result.items() if k not in ("scenario", "extra")}
        figures.update(extra)
        text = " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items())
        terminalreporter.write_line(f"{result['scenario']}: {text}")

