"""The speed paths keep the guarantees: COPY bulk enqueue, cached producer settings, log budget."""

from __future__ import annotations

import logging

import psycopg

from tests.helpers import scalar
from worker import enqueue_many
from worker.producer import COPY_THRESHOLD
from worker.runner import SuccessLogBudget


def test_copy_bulk_enqueue_returns_ids_in_order_with_defaults(conn):
    n = COPY_THRESHOLD + 50
    ids = enqueue_many([("t1", {"n": i, "s": "ü"}) for i in range(n)] + [{"queue": "t2", "payload": [1],
                                                                          "priority": 7, "max_attempts": 3}])
    assert len(ids) == n + 1 == len(set(ids))
    rows = conn.execute("SELECT id, queue, payload, priority, max_attempts, status::text, attempts, "
                        "run_at <= now(), unique_key FROM jobs ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ids
    assert rows[0][1:] == ("t1", {"n": 0, "s": "ü"}, 0, 20, "queued", 0, True, None)
    assert [r[2]["n"] for r in rows[:n]] == list(range(n))
    assert rows[-1][1:6] == ("t2", [1], 7, 3, "queued")


def test_copy_bulk_enqueue_joins_the_callers_transaction_and_notifies(db_url, conn):
    with psycopg.connect(db_url, autocommit=True) as listener:
        listener.execute("LISTEN skiplock_jobs")
        with psycopg.connect(db_url) as tx:
            enqueue_many([("t3", {}) for _ in range(COPY_THRESHOLD)], conn=tx)
            tx.rollback()
        assert scalar(conn, "SELECT count(*) FROM jobs") == 0
        with psycopg.connect(db_url) as tx:
            enqueue_many([("t3", {}) for _ in range(COPY_THRESHOLD)], conn=tx)
            tx.commit()
        assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 't3'") == COPY_THRESHOLD
        # one NOTIFY for the committed batch, none for the rolled-back one
        notes = [n.payload for n in listener.notifies(timeout=2.0, stop_after=2)]
        assert notes == ["t3"]


def test_big_batch_with_a_unique_key_still_collapses(conn):
    first = enqueue_many([{"queue": "t1", "payload": {}, "unique_key": "u1"}])
    assert len(first) == 1
    dup = {"queue": "t1", "payload": {}, "unique_key": "u1"}
    ids = enqueue_many([("t1", {}) for _ in range(COPY_THRESHOLD)] + [dup])
    assert len(ids) == COPY_THRESHOLD
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE unique_key = 'u1'") == 1


def test_success_log_budget_moves_lines_beyond_it_to_debug_and_counts_them(caplog):
    now = [10.2]
    budget = SuccessLogBudget(3, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="skiplock.worker"):
        assert [budget.level() for _ in range(5)] == [logging.INFO] * 3 + [logging.DEBUG] * 2
        assert not caplog.records
        now[0] = 11.05  # the next second: a fresh budget, and one summary for the two moved lines
        assert budget.level() == logging.INFO
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == ["2 more jobs ok in the last second"]
