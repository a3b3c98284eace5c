"""Producers: enqueue, enqueue_many, transactional enqueue, unique keys, bad input, the seed SQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from skiplock import EnqueueError, enqueue, enqueue_many
from skiplock.core import state_changes
from tests.support.helpers import scalar, wait_for


def test_enqueue_returns_id_and_stores_every_field(conn):
    when = datetime.now(UTC) + timedelta(hours=1)
    job_id = enqueue("emails", {"to": "ü@example.com", "n": [1, {"x": None}]}, priority=3, run_at=when,
                     unique_key="k1", max_attempts=4)
    row = conn.execute("SELECT queue, payload, priority, run_at, unique_key, max_attempts, status::text, attempts "
                       "FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == ("emails", {"to": "ü@example.com", "n": [1, {"x": None}]}, 3, when, "k1", 4, "queued", 0)


def test_delay_schedules_in_the_future(conn):
    enqueue("t1", {}, delay=120)
    assert scalar(conn, "SELECT run_at BETWEEN now() + interval '100 s' AND now() + interval '140 s' FROM jobs")


def test_enqueue_many_is_one_statement_and_returns_ids_in_order(conn):
    ids = enqueue_many([("t1", {"n": i}) for i in range(500)] + [{"queue": "t2", "payload": {}, "priority": 9}])
    assert len(ids) == 501 and ids == sorted(ids)
    assert [r[0] for r in conn.execute("SELECT payload->>'n' FROM jobs WHERE id = ANY(%s) ORDER BY id",
                                       (ids[:3],))] == ["0", "1", "2"]
    assert scalar(conn, "SELECT priority FROM jobs WHERE id = %s", (ids[-1],)) == 9


def test_unique_key_collapses_while_in_flight_and_frees_after_finish(db_url, conn):
    first = enqueue("t1", {}, unique_key="invoice:7")
    assert first is not None
    assert enqueue("t1", {"again": True}, unique_key="invoice:7") is None
    assert enqueue_many([{"queue": "t1", "payload": {}, "unique_key": "invoice:7"}]) == []
    # still collapsed while running
    with psycopg.connect(db_url, autocommit=True) as c:
        state_changes.claim(c, "w", ["t1"], [30.0], 1)
    assert enqueue("t1", {}, unique_key="invoice:7") is None
    state_changes.ack_batch(conn, "w", [state_changes.Outcome(first, "t1", 1, "ok")], history="keep")
    second = enqueue("t1", {}, unique_key="invoice:7")
    assert second is not None and second != first


def test_transactional_enqueue_rolls_back_with_the_caller(db_url, conn):
    with psycopg.connect(db_url) as tx_conn:
        job_id = enqueue("t1", {"rolled": "back"}, conn=tx_conn)
        assert job_id is not None
        # not visible to anyone else before commit
        assert scalar(conn, "SELECT count(*) FROM jobs") == 0
        tx_conn.rollback()
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0
    with psycopg.connect(db_url) as tx_conn:
        kept = enqueue("t1", {"committed": True}, conn=tx_conn)
        tx_conn.commit()
    assert scalar(conn, "SELECT id FROM jobs") == kept


def test_rolled_back_job_is_never_seen_by_a_running_worker(db_url, conn, spawn_worker):
    worker = spawn_worker("--poll-interval", "0.05")
    with psycopg.connect(db_url) as tx_conn:
        enqueue("t1", {"ghost": True}, conn=tx_conn)
        # let the worker poll many times while the transaction is open, then roll back
        sentinel_seen = enqueue("t1", {"sentinel": 1})
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (sentinel_seen,)) == 1)
        tx_conn.rollback()
    last = enqueue("t1", {"sentinel": 2})
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (last,)) == 1)
    assert scalar(conn, "SELECT count(*) FROM test_effects WHERE payload ? 'ghost'") == 0
    assert worker.terminate() == 0


BAD_CALLS = [
    (("", {}), {}, "queue name"),
    (("   ", {}), {}, "queue name"),
    (("x" * 129, {}), {}, "longer than 128"),
    ((None, {}), {}, "queue name"),
    (("t1", {"when": datetime.now(UTC)}), {}, "not JSON-serialisable"),
    (("t1", {1, 2}), {}, "not JSON-serialisable"),
    (("t1", float("nan")), {}, "NaN"),
    (("t1", {"bad": "nul\x00byte"}), {}, "NUL"),
    (("t1", {}), {"delay": -1}, "negative"),
    (("t1", {}), {"delay": "soon"}, "delay must be"),
    (("t1", {}), {"run_at": datetime(2030, 1, 1)}, "timezone-aware"),
    (("t1", {}), {"run_at": datetime.now(UTC), "delay": 5}, "either run_at or delay"),
    (("t1", {}), {"priority": "high"}, "priority"),
    (("t1", {}), {"priority": 2**40}, "32-bit"),
    (("t1", {}), {"max_attempts": 0}, "max_attempts"),
    (("t1", {}), {"unique_key": ""}, "unique_key"),
]


@pytest.mark.parametrize(("args", "kwargs", "message"), BAD_CALLS)
def test_bad_input_is_a_clear_error_and_writes_nothing(conn, args, kwargs, message):
    with pytest.raises(EnqueueError, match=message):
        enqueue(*args, **kwargs)
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


def test_payload_over_the_limit_is_refused(conn, monkeypatch):
    monkeypatch.setenv("SKIPLOCK_MAX_PAYLOAD_BYTES", "100")
    with pytest.raises(EnqueueError, match="over the limit of 100"):
        enqueue("t1", {"blob": "x" * 200})
    enqueue("t1", {"blob": "x" * 10})
    assert scalar(conn, "SELECT count(*) FROM jobs") == 1


def test_enqueue_many_validates_every_item_before_writing(conn):
    with pytest.raises(EnqueueError, match="job #2"):
        enqueue_many([("t1", {}), ("t1", {}), ("", {})])
    with pytest.raises(EnqueueError, match="job #0"):
        enqueue_many(["not-a-pair"])  # type: ignore[list-item]
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


SEED_INSERT = """
INSERT INTO jobs (queue, priority, run_at, unique_key, payload)
VALUES (%s, %s, coalesce(%s, now()), %s, %s)
ON CONFLICT (unique_key) WHERE status IN ('queued','running') DO NOTHING
RETURNING id
"""

SEED_OBSERVABILITY = [
    """SELECT queue, count(*) FILTER (WHERE status='queued') AS ready,
       count(*) FILTER (WHERE status='running') AS running
       FROM jobs GROUP BY queue ORDER BY ready DESC""",
    """SELECT id, queue, now()-started_at AS runtime, attempts, worker_id
       FROM jobs
       WHERE status='running' AND lease_until > now()
       ORDER BY runtime DESC LIMIT 50""",
    """SELECT queue, percentile_disc(0.99) WITHIN GROUP (ORDER BY now()-run_at) AS p99_wait
       FROM jobs WHERE status='queued' GROUP BY queue""",
]


def test_seed_sql_producer_job_is_run_by_the_python_worker(conn, spawn_worker):
    job_id = conn.execute(SEED_INSERT, ("t1", 0, None, "seed:1", '{"from": "sql"}')).fetchone()[0]
    assert conn.execute(SEED_INSERT, ("t1", 0, None, "seed:1", "{}")).fetchone() is None
    worker = spawn_worker()
    wait_for(lambda: scalar(conn, "SELECT payload->>'from' FROM test_effects WHERE job_id = %s", (job_id,)) == "sql")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs") == 0, message="ack")
    assert worker.terminate() == 0


def test_seed_observability_queries_run_unchanged(db_url, conn):
    enqueue_many([("t1", {}), ("t1", {}), ("t2", {})])
    with psycopg.connect(db_url, autocommit=True) as c:
        state_changes.claim(c, "w", ["t2"], [30.0], 1)
    backlog, long_runners, p99 = (conn.execute(q).fetchall() for q in SEED_OBSERVABILITY)
    assert backlog[0][:2] == ("t1", 2) and ("t2", 0, 1) in backlog
    assert [r[1] for r in long_runners] == ["t2"]
    assert {r[0] for r in p99} == {"t1"}


def test_seed_on_conflict_on_constraint_form_really_fails(conn):
    """Why the README warns: the seed's form names a constraint that cannot exist."""
    with pytest.raises(psycopg.errors.UndefinedObject):
        conn.execute("INSERT INTO jobs (queue, payload, unique_key) VALUES ('t1', '{}', 'k') "
                     "ON CONFLICT ON CONSTRAINT jobs_unique_inflight DO NOTHING")


def test_a_tasks_own_max_attempts_applies_unless_enqueue_names_one(conn):
    """@task(max_attempts=...) used to be stored and never read."""
    from skiplock import enqueue, enqueue_many, task
    from skiplock.core.registry import REGISTRY

    @task("few-attempts", max_attempts=3)
    def handler(payload):
        return None

    try:
        default = enqueue("few-attempts", {})
        chosen = enqueue("few-attempts", {}, max_attempts=7)
        many = enqueue_many([("few-attempts", {}), {"queue": "few-attempts", "payload": {}, "max_attempts": 2}])
        other = enqueue("no-task-here", {})
        got = dict(conn.execute("SELECT id, max_attempts FROM jobs").fetchall())
        assert [got[default], got[chosen], got[many[0]], got[many[1]]] == [3, 7, 3, 2]
        assert got[other] == 20  # SKIPLOCK_MAX_ATTEMPTS's default
    finally:
        REGISTRY._tasks.pop("few-attempts", None)
