"""Scenario black_hole: every connection of one worker (pool and LISTEN) goes silent, no RST.

Worker A reaches PostgreSQL through a proxy that black-holes all its connections mid-drain and
holds new ones for a while; worker B is connected directly. A must notice within its client-side
deadline (SKIPLOCK_DB_DEADLINE), say so on /healthz, reconnect once the network is back and carry
on; its jobs are reaped by B after the lease and completed once; its late results are fenced out.
The console behind the same proxy answers with a clear 503 instead of hanging its threads.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from skiplock import enqueue_many
from skiplock.webapp import create_app
from skiplock.webapp.db import close_app
from skiplock.webapp.settings import Account
from tests.fault.blackhole import BlackholeProxy
from tests.fault.books import audit, record
from tests.fault.conftest import FAST_RECOVERY, remaining, stop
from tests.support.helpers import scalar, wait_for

JOBS = 600
DEADLINE = 3.0  # seconds: SKIPLOCK_DB_DEADLINE for the cut-off worker
HOLD_NEW = 10.0  # seconds during which new connections are black-holed too


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _health(port: int) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=DEADLINE * 3) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _effects_of(conn: psycopg.Connection, pid: int) -> int:
    return int(scalar(conn, "SELECT count(*) FROM test_effects WHERE pid = %s", (pid,)))


@pytest.mark.slow
def test_black_holed_worker_notices_recovers_and_loses_nothing(conn, db_url, spawn_worker):
    params = conninfo_to_dict(db_url)
    proxy = BlackholeProxy(str(params.get("host", "127.0.0.1")), int(str(params.get("port", 5432))))
    proxied_url = make_conninfo(db_url, host="127.0.0.1", port=str(proxy.port))
    health_port = _free_port()
    try:
        ids = enqueue_many([("t1", {"sleep": 0.01, "n": i}) for i in range(JOBS)])
        cut = spawn_worker(url=proxied_url, SKIPLOCK_CONCURRENCY="8", SKIPLOCK_DB_DEADLINE=str(DEADLINE),
                           SKIPLOCK_HEALTH_PORT=str(health_port), **FAST_RECOVERY)
        wait_for(lambda: _effects_of(conn, cut.pid) >= 50, timeout=60, message="the proxied worker to be mid-drain")
        assert _health(health_port)[0] == 200

        console = create_app({"TESTING": True, "DATABASE_URL": proxied_url, "SECRET_KEY": "k", "AUTH": True,
                              "ACCOUNTS": [Account("ops", "admin", password="pw")], "DB_DEADLINE": DEADLINE,
                              "POOL_TIMEOUT": DEADLINE})
        client = console.test_client()
        headers = {"Authorization": "Basic b3BzOnB3"}  # ops:pw
        assert client.get("/", headers=headers).status_code == 200

        proxy.freeze(hold_new_for=HOLD_NEW)
        frozen_at = time.monotonic()
        direct = spawn_worker(SKIPLOCK_CONCURRENCY="8", **FAST_RECOVERY)

        # the cut-off worker says so, within its deadline plus the health probe's own
        wait_for(lambda: _health(health_port)[0] == 503, timeout=60, message="/healthz to report the cut")
        detected = time.monotonic() - frozen_at
        status, details = _health(health_port)
        assert status == 503 and details.get("database") is False, details

        # the console behind the frozen proxy answers (503, a clear message) instead of hanging
        page = client.get("/", headers=headers)
        assert page.status_code == 503 and "database is not answering" in page.get_data(as_text=True)
        close_app(console)

        # the network comes back for new connections: the worker reconnects and runs jobs again
        done_by_cut = _effects_of(conn, cut.pid)
        wait_for(lambda: _effects_of(conn, cut.pid) > done_by_cut or remaining(conn) == 0, timeout=120,
                 message="the cut-off worker to carry on after the network is back")
        resumed = time.monotonic() - frozen_at
        wait_for(lambda: _health(health_port)[0] == 200 or remaining(conn) == 0, timeout=60,
                 message="/healthz healthy again")
        wait_for(lambda: remaining(conn) == 0, timeout=180, message="the queue to drain")
        assert cut.proc.poll() is None, "the cut-off worker must survive, not crash"
        assert stop(cut, conn) == 0 and stop(direct, conn) == 0
        books = record(audit(conn, "black_hole", ids), detection_s=round(detected, 2),
                       recovery_s=round(resumed, 2), deadline_s=DEADLINE, held_new_s=HOLD_NEW,
                       stale_acks_refused=cut.log().count("stale"))
        assert books.lost == 0
        assert books.completed == JOBS
        assert books.dead == books.failed == books.queued == books.running == 0
        assert "outlived its deadline" in cut.log()
    finally:
        proxy.close()
