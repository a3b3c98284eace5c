"""Scenario 6, idle_in_tx: another session holds a transaction open while the queue works.

The queue must keep working; the dead row versions left by claimed-and-deleted jobs cannot be
vacuumed while that transaction is open (it holds back the xmin horizon) and are reclaimed after
it ends; and the offending session is named, with its pid, so an operator can end it.
"""

from __future__ import annotations

import importlib
from typing import Any

import psycopg
import pytest

from skiplock import enqueue_many
from skiplock.core.plumbing.config import load_settings
from tests.fault.books import audit, record
from tests.fault.conftest import FAST_RECOVERY, remaining, stop
from tests.support.helpers import scalar, wait_for

JOBS = 1500

# Sessions idle inside a transaction for more than %(seconds)s, oldest first, with what an operator
# needs to act (pg_terminate_backend(pid)). The ops branch's `skiplock doctor` is meant to run the
# same check; until it lands this is the query the assertion is written against.
IDLE_IN_TX_SQL = """
SELECT pid, application_name, usename, client_addr, backend_xid, backend_xmin,
       extract(epoch FROM now() - xact_start) AS xact_seconds, left(query, 200) AS last_query
  FROM pg_stat_activity
 WHERE datname = current_database() AND state IN ('idle in transaction', 'idle in transaction (aborted)')
   AND xact_start < now() - make_interval(secs => %(seconds)s)
 ORDER BY xact_start
"""


def idle_in_transaction(conn: psycopg.Connection, seconds: float = 0.0) -> list[dict]:
    """Sessions holding a transaction open while idle (they block vacuum for every table)."""
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute(IDLE_IN_TX_SQL, {"seconds": seconds}).fetchall()


def _doctor() -> Any:
    """skiplock.monitor.doctor once the ops branch is merged, else None (the query above is the check)."""
    try:
        return importlib.import_module("skiplock.monitor.doctor")
    except ModuleNotFoundError as exc:
        if exc.name != "skiplock.monitor.doctor":
            raise
        return None


def dead_tuples_after_vacuum(conn: psycopg.Connection) -> int:
    """VACUUM jobs, then the dead row versions it could not remove (stats made current first)."""
    conn.execute("VACUUM jobs")
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return int(scalar(conn, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'jobs'"))


@pytest.mark.slow
def test_idle_in_tx(conn, db_url, spawn_worker):
    baseline = dead_tuples_after_vacuum(conn)
    holder = psycopg.connect(db_url, application_name="fault-idle-holder")  # not autocommit: BEGIN implied
    try:
        holder.execute("SELECT txid_current()")  # an xid: the horizon cannot pass it until we end
        ids = enqueue_many([("t1", {"n": i}) for i in range(JOBS)])
        worker = spawn_worker(SKIPLOCK_CONCURRENCY="10", **FAST_RECOVERY)
        wait_for(lambda: remaining(conn) == 0, timeout=120, message="the queue to drain past the open transaction")

        held_back = dead_tuples_after_vacuum(conn)
        # A live worker's own transactions are idle between their statements for a moment (a heartbeat's
        # several statements), and a check at that moment lists them: idle in one for over a second is what
        # holds vacuum back. The holder's is older than that by now (opened before the enqueue and the drain).
        wait_for(lambda: scalar(conn, "SELECT now() - xact_start > interval '1 second' FROM pg_stat_activity "
                                      "WHERE pid = %s", (holder.info.backend_pid,)), timeout=10,
                 message="the holder's transaction to be a second old")
        offenders = idle_in_transaction(conn, seconds=1.0)
        assert [o["application_name"] for o in offenders] == ["fault-idle-holder"]
        assert offenders[0]["pid"] == holder.info.backend_pid
        assert offenders[0]["backend_xid"] is not None
        doctor = _doctor()
        if doctor is not None:  # `skiplock doctor` (ops branch) must name the same session
            check = doctor.check_long_transactions(conn, load_settings(), max_age=0)
            assert check.status == "fail"
            assert (holder.info.backend_pid, "fault-idle-holder") in [(d["pid"], d["application"])
                                                                       for d in check.details]
    finally:
        holder.rollback()
        holder.close()
    reclaimed = dead_tuples_after_vacuum(conn)
    assert stop(worker, conn) == 0

    books = record(audit(conn, "idle_in_tx", ids), dead_tuples_held=held_back, dead_tuples_after=reclaimed)
    assert books.lost == 0
    assert books.completed == JOBS
    assert books.duplicated == 0
    # each job leaves two dead versions (claim UPDATE, ack DELETE); VACUUM could remove none of them
    assert held_back >= JOBS + baseline
    assert reclaimed < JOBS // 10
