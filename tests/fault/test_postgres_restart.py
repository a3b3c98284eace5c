"""Scenario 3, postgres_restart: restart the PostgreSQL server in the middle of a drain.

The server is a ThrowawayCluster this test owns, so restarting it disturbs no other test. Workers
must reconnect on their own (pool, acker, claim loop), re-establish LISTEN, and lose nothing; the
console (its own pool) must serve pages again without a restart.
Recovery seconds (server back -> first job completed) are measured and reported, never asserted.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from skiplock import enqueue, enqueue_many
from skiplock.runtime.claimer import CLAIM_RETRY_MAX_SECONDS
from skiplock.webapp import create_app
from skiplock.webapp.db import close_app
from tests.conftest import TEST_TABLES_SQL
from tests.fault.books import audit, record
from tests.fault.conftest import FAST_RECOVERY, effects, remaining, stop
from tests.support.helpers import scalar, wait_for
from tests.support.pgcluster import ThrowawayCluster

JOBS = 1500
# A long poll interval: after the drain, only a working LISTEN can make the worker see a new job fast.
SETTINGS = {**FAST_RECOVERY, "SKIPLOCK_CONCURRENCY": "8", "SKIPLOCK_POLL_INTERVAL": "20"}


@pytest.fixture
def cluster_db() -> Iterator[tuple[ThrowawayCluster, str]]:
    cluster = ThrowawayCluster()
    try:
        yield cluster, cluster.migrated_database("skiplock_fault", TEST_TABLES_SQL)
    finally:
        cluster.destroy()


def _connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True, application_name="fault-test")


@pytest.mark.slow
def test_postgres_restart(cluster_db, spawn_worker):
    cluster, url = cluster_db
    with _connect(url) as conn:
        ids = enqueue_many([("t1", {"sleep": 0.01}) for _ in range(JOBS)], conn=conn)
    workers = [spawn_worker(url=url, **SETTINGS) for _ in range(2)]
    console = create_app({"TESTING": True, "DATABASE_URL": url, "AUTH": False, "SECRET_KEY": "fault"})
    browser = console.test_client()
    assert browser.get("/").status_code == 200
    with _connect(url) as conn:
        wait_for(lambda: effects(conn) >= JOBS // 5, timeout=60, message="the drain to be under way")

    down_at = time.monotonic()
    cluster.restart("fast")  # terminates every session, like a failover or a crash-restart
    up_at = time.monotonic()

    conn = _connect(url)
    try:
        done_at_restart = effects(conn)
        wait_for(lambda: effects(conn) > done_at_restart, timeout=120, message="work to resume after the restart")
        recovered = time.monotonic() - up_at
        # the console's pool checks each connection before lending it, so the connections the
        # restart cut are replaced before a page sees them: no error page once the server is back
        pages = [browser.get("/").status_code]

        def serves_a_page() -> bool:  # every answer is kept: none may be an error page
            pages.append(browser.get("/").status_code)
            return pages[-1] == 200

        wait_for(serves_a_page, timeout=60, message="the console to serve pages again")
        assert pages[0] == 200 and set(pages) == {200}
        wait_for(lambda: remaining(conn) == 0, timeout=180, message="the queue to drain")
        # both listeners are connected again: a new job is picked up long before the 20 s poll
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                      "current_database() AND application_name LIKE 'skiplock-listener%%'") == 2,
                 timeout=60, message="both listeners to reconnect")
        before = effects(conn)
        late = enqueue("t1", {"late": True}, conn=conn)
        assert late is not None
        wait_for(lambda: effects(conn) > before, timeout=15, message="NOTIFY to wake a worker after the restart")
        wait_for(lambda: remaining(conn) == 0, timeout=30, message="the late job's ack")
        for w in workers:
            assert stop(w, conn) == 0
        assert any("database unavailable" in w.log() or "listener connection lost" in w.log() for w in workers)

        books = record(audit(conn, "postgres_restart", [*ids, late]), restart_s=round(up_at - down_at, 2),
                       recovery_s=round(recovered, 2), console_failed_pages=pages.count(503))
    finally:
        conn.close()
        close_app(console)
    assert books.lost == 0
    assert books.completed == JOBS + 1
    assert books.dead == books.failed == books.queued == books.running == 0
    assert books.duplicated <= 2 * int(SETTINGS["SKIPLOCK_CONCURRENCY"])  # at most what was in flight


# Long enough that psycopg_pool's own doubling schedule (attempts at 1, 3, 7, 15, 31 s) would next try about
# 15 s after the server is back: the capped schedule (plumbing/db.py RECONNECT_MAX_DELAY) tries every 0.5 s.
OUTAGE_SECONDS = 16
# The workers claim again within about a second of the server accepting connections. The bound is wide for a
# loaded machine, and still far below the ~15 s the uncapped schedule took after this outage.
RESUME_BOUND_SECONDS = 5.0
DUE_DURING_OUTAGE = 50


@pytest.mark.slow
def test_claims_resume_within_a_second_or_so_after_a_long_outage(cluster_db, spawn_worker):
    cluster, url = cluster_db
    with _connect(url) as conn:
        ids = [enqueue("t1", {"warm": True}, conn=conn)]
        # jobs that fall due while the server is down: only a claim after it is back can run them
        due = datetime.now(UTC) + timedelta(seconds=3)
        ids += enqueue_many([{"queue": "t1", "payload": {"n": n}, "run_at": due} for n in range(DUE_DURING_OUTAGE)],
                            conn=conn)
    worker = spawn_worker(url=url, **SETTINGS)
    with _connect(url) as conn:
        wait_for(lambda: effects(conn) >= 1, timeout=60, message="the worker to run its first job")

    cluster.stop("fast")
    time.sleep(OUTAGE_SECONDS)  # the outage itself, not a synchronisation: the server is down all this time
    cluster.start()
    up_at = time.monotonic()

    with _connect(url) as conn:
        wait_for(lambda: effects(conn) > 1, timeout=60, message="a claim after the server came back")
        resumed = time.monotonic() - up_at
        wait_for(lambda: remaining(conn) == 0, timeout=60, message="the jobs due during the outage to run")
        assert stop(worker, conn) == 0
        books = record(audit(conn, "postgres_long_outage", [i for i in ids if i is not None]),
                       outage_s=OUTAGE_SECONDS, resumed_s=round(resumed, 2))
    log = worker.log()
    assert "database unavailable" in log
    # every wait between two attempts is capped, however long the outage: the claim loop's and the listener's
    # (the pool's own schedule is tests/unit/test_reconnect_schedule.py)
    waits = [float(s) for s in re.findall(r"(?:retrying|reconnecting) in ([0-9.]+)s", log)]
    assert waits and max(waits) <= CLAIM_RETRY_MAX_SECONDS, waits
    assert books.lost == 0 and books.completed == DUE_DURING_OUTAGE + 1
    assert resumed < RESUME_BOUND_SECONDS, f"claims resumed {resumed:.1f}s after the server was back"
