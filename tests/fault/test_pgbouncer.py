"""Scenario pgbouncer: workers, producers and the console behind PgBouncer in transaction pooling mode.

The pools go through PgBouncer; LISTEN and migrations go direct (SKIPLOCK_DIRECT_URL), since they
need a session. PgBouncer 1.18 (Debian 12) has no protocol-level prepared statements, so psycopg's
automatic preparing is turned off for the pooled URL (SKIPLOCK_PREPARED_STATEMENTS=off). Claims,
acks, heartbeats, enqueue with conn= in the producer's transaction and the recurring scheduler all
run through it; a worker is SIGKILLed mid-drain and nothing is lost.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from skiplock import enqueue, enqueue_many
from skiplock.core.plumbing.db import connect
from skiplock.webapp import create_app
from skiplock.webapp.db import close_app
from tests.fault.books import audit, record
from tests.fault.conftest import FAST_RECOVERY, effects, remaining, running_of, stop
from tests.fault.pgbouncer import pgbouncer
from tests.support.helpers import scalar, wait_for

JOBS = 400


def test_prepared_statements_break_behind_transaction_pooling_unless_turned_off(db_url, monkeypatch):
    """Why the setting exists: two clients sharing server connections collide on psycopg's names."""
    def twelve_rounds(a: psycopg.Connection, b: psycopg.Connection) -> None:
        for i in range(12):
            a.execute("SELECT %s::int", (i,))
            b.execute("SELECT %s::int + 1", (i,))

    with pgbouncer(db_url) as pooled:
        with pytest.raises(psycopg.errors.DuplicatePreparedStatement), \
                psycopg.connect(pooled, autocommit=True) as a, psycopg.connect(pooled, autocommit=True) as b:
            twelve_rounds(a, b)
        monkeypatch.setenv("SKIPLOCK_PREPARED_STATEMENTS", "off")
        with connect(pooled, "skiplock-test") as a, connect(pooled, "skiplock-test") as b:
            twelve_rounds(a, b)  # skiplock's own connections: no error


@pytest.mark.slow
def test_behind_pgbouncer_nothing_is_lost(conn, db_url, spawn_worker, monkeypatch):
    monkeypatch.setenv("SKIPLOCK_PREPARED_STATEMENTS", "off")
    with pgbouncer(db_url) as pooled:
        settings = {"SKIPLOCK_DIRECT_URL": db_url, "SKIPLOCK_PREPARED_STATEMENTS": "off",
                    "SKIPLOCK_TASKS": "tests.support.handlers,tests.support.recurring_handlers", **FAST_RECOVERY}
        # producers enqueue in their own transactions, through the pooler
        with psycopg.connect(pooled, prepare_threshold=None) as producer:
            with producer.transaction():
                ids = [i for i in enqueue_many([("t1", {"sleep": 0.02, "n": n}) for n in range(JOBS - 1)],
                                               conn=producer) if i is not None]
            with producer.transaction():
                one = enqueue("t1", {"n": "one"}, conn=producer)
            ids.append(int(one or 0))
            try:
                with producer.transaction():
                    enqueue("t1", {"n": "rolled back"}, conn=producer)
                    raise RuntimeError("the business write failed")
            except RuntimeError:
                pass
        assert scalar(conn, "SELECT count(*) FROM jobs WHERE payload->>'n' = 'rolled back'") == 0

        first = spawn_worker(url=pooled, **settings)
        wait_for(lambda: effects(conn) >= JOBS // 4, timeout=60, message="the first worker to be mid-drain")
        first.kill()
        killed_at = time.monotonic()
        # PgBouncer keeps the server sessions after the client died: wait until none of them is still
        # running a statement the killed worker sent (an ack that commits late), then read its jobs
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM pg_stat_activity WHERE state <> 'idle' AND "
                                "datname = current_database() AND application_name LIKE 'skiplock-worker%%' "
                                "AND pid <> pg_backend_pid()") == 0,
                 timeout=30, message="the killed worker's statements to finish")
        in_flight = running_of(conn, first.pid)
        second = spawn_worker(url=pooled, **settings)
        wait_for(lambda: not set(in_flight) & {r[0] for r in conn.execute(
            "SELECT id FROM jobs WHERE status = 'running'").fetchall()} or remaining(conn) == 0, timeout=60,
            message="the reaper to hand back the killed worker's jobs")
        recovered = time.monotonic() - killed_at
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 't1'") == 0, timeout=180,
                 message="the queue to drain")
        # the recurring scheduler fired its slots through the pooler too
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM recurring_slots WHERE name = 'tick'") >= 2, timeout=30,
                 message="recurring slots")
        # the listener went direct: its session is on the server with its name, the pools' are PgBouncer's
        assert scalar(conn, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                      "AND application_name LIKE 'skiplock-listener%%'") >= 1

        console = create_app({"TESTING": True, "DATABASE_URL": pooled, "SECRET_KEY": "k", "AUTH": False})
        client = console.test_client()
        pages = [client.get(p).status_code for p in ("/", "/dead/", "/running/", "/workers/") * 3]
        close_app(console)
        assert set(pages) == {200}
        assert stop(second, conn) == 0

    books = record(audit(conn, "pgbouncer", ids), in_flight_at_kill=len(in_flight), recovery_s=round(recovered, 2))
    assert books.lost == 0
    assert books.completed == JOBS
    assert books.dead == books.failed == books.queued == books.running == 0
    assert books.duplicated <= len(in_flight)
    for worker in (first, second):
        assert "prepared statement" not in worker.log() and "Traceback" not in worker.log(), worker.log()[-3000:]
