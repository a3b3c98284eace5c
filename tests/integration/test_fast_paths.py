"""The speed paths keep the guarantees: COPY bulk enqueue, cached producer settings, log budget."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import psycopg
import pytest

from skiplock import enqueue_many
from skiplock.core import state_changes
from skiplock.core.producer import COPY_THRESHOLD
from skiplock.core.sql import queries
from skiplock.runtime.executor import SuccessLogBudget
from tests.support.helpers import scalar, wait_for, worker_pool_settings

JOBS_ACK_SQL = queries("jobs_ack")
JOBS_RUNNING_SQL = queries("jobs_running")


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


@pytest.mark.parametrize("n", [COPY_THRESHOLD - 1, COPY_THRESHOLD])
def test_batches_on_either_side_of_the_copy_threshold_store_the_same_rows(conn, n):
    # below the threshold the unnest INSERT, from it COPY: the same columns, defaults and order
    ids = enqueue_many([("t1", {"n": i, "s": "ü"}) for i in range(n)])
    rows = conn.execute("SELECT id, queue, payload, priority, max_attempts, status::text, attempts, run_at <= now(), "
                        "unique_key, lock_key, tenant, version FROM jobs ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ids and len(ids) == n
    assert [r[2] for r in rows] == [{"n": i, "s": "ü"} for i in range(n)]
    assert {r[1:2] + r[3:] for r in rows} == {("t1", 0, 20, "queued", 0, True, None, None, None, 1)}


def test_a_big_batch_on_a_pipelined_connection_is_inserted_without_copy(db_url, conn):
    # libpq refuses COPY in pipeline mode ("COPY cannot be used in pipeline mode"): the batch that
    # would take COPY goes through the unnest INSERT instead, in the caller's transaction
    with psycopg.connect(db_url) as tx:
        with tx.pipeline():
            ids = enqueue_many([("t1", {"n": i}) for i in range(COPY_THRESHOLD + 10)], conn=tx)
        assert scalar(conn, "SELECT count(*) FROM jobs") == 0  # not committed yet
        tx.commit()
    rows = conn.execute("SELECT id, payload FROM jobs ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ids and [r[1] for r in rows] == [{"n": i} for i in range(COPY_THRESHOLD + 10)]


def test_copy_bulk_enqueue_joins_the_callers_transaction_and_notifies(db_url, conn, spawn_worker):
    # the trigger notifies only while a worker waits (migration 014): one idle worker on another queue
    spawn_worker(SKIPLOCK_QUEUES="t4")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") == 1, timeout=60, message="an idle worker")
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
        assert notes == [""]


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


def _plan(conn: psycopg.Connection, statement: str, params: Mapping[str, object]) -> str:
    with conn.transaction(force_rollback=True):
        rows = conn.execute("EXPLAIN " + statement, params).fetchall()
    return "\n".join(r[0] for r in rows)


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("analyzed", ["with_all_queued", "while_empty"])
def test_ack_and_heartbeat_find_rows_by_primary_key_even_with_stale_statistics(fresh_db_url, plan_cache_mode,
                                                                               analyzed):
    # Statistics taken while every job was queued make the planner believe one job runs; a
    # fence written as `status = 'running'` then walked all of the running-jobs index per ack (seconds
    # per ack in the seed recipe). Statistics of an empty table (a backlog enqueued since)
    # made it scan the table per ack instead, or join the batch against a whole-index scan.
    # Every ack and heartbeat must find each row by a primary-key probe (worker/core/sql/jobs_running.sql).
    # a database of its own: the statistics made here must not steer other tests' plans
    with psycopg.connect(fresh_db_url, autocommit=True) as conn:
        if analyzed == "while_empty":
            conn.execute("VACUUM ANALYZE jobs")
        conn.execute("INSERT INTO jobs (queue, payload) SELECT 't1', '{}' FROM generate_series(1, 20000)")
        if analyzed == "with_all_queued":
            conn.execute("ANALYZE jobs")
        claimed = state_changes.claim(conn, "w1", ["t1"], [30.0], 2000)
        ids = [job.id for job in claimed[:200]]  # a full ack batch
        conn.execute(f"SET plan_cache_mode = {plan_cache_mode}")
        ack = {"worker_id": "w1", "ok_ids": ids, "ok_attempts": [1] * 200, "err_ids": ids[:1], "err_attempts": [1],
               "err_status": ["queued"], "err_delay": [1.0], "err_text": ["x"],
               "err_headline": ["x"], "err_group": ["x"], "res_ids": ids[:1], "res_values": ["{\"n\": 1}"],
               "res_errors": [None]}
        for statement, params in ((JOBS_ACK_SQL.ack_batch, ack), (JOBS_ACK_SQL.ack_batch_keep, ack),
                                  (JOBS_RUNNING_SQL.heartbeat, {"worker_id": "w1", "ids": ids, "leases": [30.0] * 200}),
                                  (JOBS_RUNNING_SQL.give_back, {"worker_id": "w1", "ids": ids, "attempts": [None] * 200,
                                                                "delays": [0.0] * 200, "snoozed": [False] * 200})):
            plan = _plan(conn, statement, params)
            assert "jobs_running_idx" not in plan and "jobs_lease_idx" not in plan, plan
            assert "Seq Scan" not in plan, plan
            # one primary-key probe per id of the batch, then the row itself by its ctid
            assert "Index Cond: (id = v.id)" in plan, plan
            assert "TID Cond: (ctid = f.ctid)" in plan, plan
        conn.execute("RESET ALL")
        # and the statements still do their job: the fence holds for the owner only
        assert state_changes.ack_batch(conn, "w2", [state_changes.Outcome(ids[0], "t1", 1, "ok")],
                                       history="delete") == set()
        assert state_changes.ack_batch(conn, "w1", [state_changes.Outcome(ids[0], "t1", 1, "ok")],
                                       history="delete") == {ids[0]}


@pytest.mark.parametrize("prepared", ["on", "off"])
def test_the_claim_connection_runs_without_jit_and_without_waiting_for_the_flush(db_url, conn, monkeypatch,
                                                                                 prepared):
    # JIT off: a backlog's row estimates made each claim compile for 200-470 ms (claimer.claims_commit_async).
    # Behind PgBouncer in transaction mode (prepared statements off) no session setting is made.
    settings = "SELECT current_setting('jit'), current_setting('synchronous_commit')"
    server = conn.execute(settings).fetchone()
    monkeypatch.setenv("SKIPLOCK_PREPARED_STATEMENTS", prepared)
    monkeypatch.setenv("SKIPLOCK_POLL_INTERVAL", "0.1")
    found = worker_pool_settings(conn, "claim_pool", settings)
    assert found == (("off", "off") if prepared == "on" else server)
