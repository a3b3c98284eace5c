"""Scenario 4, pg_backend_kill: pg_terminate_backend on every worker connection, repeatedly.

Pool connections, listeners and the handlers' own connections (all named 'skiplock-...') are cut
while jobs run. Workers must reconnect, keep their finished results until they can ack them, and
lose nothing.
"""

from __future__ import annotations

import pytest

from skiplock import enqueue_many
from tests.fault.books import audit, record
from tests.fault.conftest import FAST_RECOVERY, effects, remaining, stop
from tests.support.helpers import wait_for

JOBS = 1200
ROUNDS = 6
SETTINGS = {**FAST_RECOVERY, "SKIPLOCK_CONCURRENCY": "8", "SKIPLOCK_LEASE_SECONDS": "5"}

# Every session of the worker processes; the test's own producer pool is spared so it can keep
# enqueueing (it is not under test here).
KILL_SQL = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid()
   AND application_name LIKE 'skiplock-%' AND application_name <> 'skiplock-producer'
"""


@pytest.mark.slow
def test_pg_backend_kill(conn, spawn_worker):
    ids = enqueue_many([("t1", {"sleep": 0.01}) for _ in range(JOBS)])
    workers = [spawn_worker(**SETTINGS) for _ in range(2)]
    terminated = 0
    for round_no in range(ROUNDS):
        before = effects(conn)
        wait_for(lambda: effects(conn) >= before + 50 or remaining(conn) == 0, timeout=60,  # noqa: B023 (wait_for calls it within this iteration)
                 message=f"progress before kill round {round_no}")
        terminated += conn.execute(KILL_SQL).fetchone()[0]
    wait_for(lambda: remaining(conn) == 0, timeout=120, message="the queue to drain")
    assert all(w.proc.poll() is None for w in workers), "a worker died instead of reconnecting"
    for w in workers:
        assert stop(w, conn) == 0

    books = record(audit(conn, "pg_backend_kill", ids), rounds=ROUNDS, sessions_terminated=terminated)
    assert terminated >= ROUNDS  # each round really cut connections
    assert books.lost == 0
    assert books.completed == JOBS
    assert books.dead == books.failed == books.queued == books.running == 0
    # a result is only redone when its ack could not be written before the lease ran out
    assert books.duplicated <= ROUNDS * 2 * int(SETTINGS["SKIPLOCK_CONCURRENCY"])
