"""Pushed alerts: a local webhook (Apprise's json:// destination) hears what a real worker finds, once, and
hears it resolved; the rules, the held-back repeats and the one-worker lock are checked pass by pass."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg
import pytest

from skiplock import enqueue
from skiplock.core import state_changes
from skiplock.core.errors import ConfigError
from skiplock.core.plumbing.config import load_settings
from skiplock.monitor.alert_rules import AlertSettings
from skiplock.services.alert_delivery import apprise_for
from skiplock.services.alerts import AlertService, last_sent
from tests.support.helpers import scalar, wait_for


class Webhook:
    """An HTTP endpoint on loopback that keeps every JSON message posted to it."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        received = self.messages

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def texts(self) -> list[str]:
        return [f"{m.get('title', '')}\n{m.get('message', '')}" for m in self.messages]

    def count(self, *words: str) -> int:
        return sum(all(w in text for w in words) for text in self.texts())


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.server.shutdown()


ALERTING = {"SKIPLOCK_ALERT_DEAD_COUNT": "1", "SKIPLOCK_ALERT_INTERVAL": "0.5",
            "SKIPLOCK_CONSOLE_URL": "http://console.example"}


@pytest.mark.slow
def test_a_job_that_dies_alerts_once_and_is_resolved_when_its_dead_letter_is_purged(db_url, conn, spawn_worker,
                                                                                    webhook):
    worker = spawn_worker(SKIPLOCK_ALERT_URLS=webhook.url, **ALERTING)
    dead = enqueue("t2", {"permanent": True}, conn=conn)
    wait_for(lambda: webhook.count("FIRING", "'t2'"), timeout=60, message="the firing alert")
    # other rules may fire too on a fresh test database (the doctor's checks): only queue t2's messages count here
    text = next(m for m in webhook.texts() if "FIRING" in m and "'t2'" in m)
    assert "1 job(s) of queue 't2' died" in text and "http://console.example/dead/?queue=t2" in text
    assert re.search(r"Since: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", text)
    # while the dead letter stays, later passes hold the repeat back
    t2_condition = "SELECT {} FROM alert_conditions WHERE key = 'dead_rise:t2'"
    wait_for(lambda: scalar(conn, t2_condition.format("count(*)")) == 1, timeout=30, message="the condition")
    passes_later = scalar(conn, "SELECT now()")
    wait_for(lambda: scalar(conn, t2_condition.format("max(last_seen)")) > passes_later + timedelta(seconds=1),
             timeout=30, message="two more passes")
    assert webhook.count("FIRING", "'t2'") == 1

    assert state_changes.purge_finished(conn, [dead]) == [dead]
    wait_for(lambda: webhook.count("RESOLVED", "'t2'"), timeout=60, message="the resolved alert")
    assert webhook.count("FIRING", "'t2'") == 1
    # the worker records each message right after its delivery
    wait_for(lambda: [row[1] for row in last_sent(conn) if "'t2'" in row[3]][:2] == ["resolved", "firing"],
             timeout=30, message="both messages recorded")
    assert all(row[5] for row in last_sent(conn))  # delivered
    assert worker.proc.poll() is None


@pytest.mark.slow
def test_a_worker_killed_mid_run_fires_the_reaped_rule(db_url, conn, spawn_worker, webhook):
    victim = spawn_worker(SKIPLOCK_LEASE_SECONDS="1", SKIPLOCK_HEARTBEAT_INTERVAL="0.3")
    job = enqueue("t1", {"sleep_after": 60}, conn=conn)
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s", (job,)) == 1,
             timeout=60, message="the run to be under way")
    victim.kill()
    spawn_worker(SKIPLOCK_ALERT_URLS=webhook.url, SKIPLOCK_REAPER_INTERVAL="0.2", SKIPLOCK_QUEUES="t3", **ALERTING)
    wait_for(lambda: webhook.count("FIRING", "reaped", "'t1'"), timeout=60, message="the reaped alert")
    assert any("a worker is dying mid-run" in m for m in webhook.texts())


def _service(db_url: str, sent: list[tuple[str, str]], **env: str) -> AlertService:
    def connect() -> Any:
        return psycopg.connect(db_url, autocommit=True)

    def send(title: str, body: str) -> None:
        sent.append((title, body))

    return AlertService(connect, load_settings({}), AlertSettings.from_env({"SKIPLOCK_ALERT_URLS": "test://", **env}),
                        send, with_doctor=False)


def test_each_condition_fires_once_and_resolves_once(db_url, conn):
    sent: list[tuple[str, str]] = []
    service = _service(db_url, sent, SKIPLOCK_ALERT_OLDEST_READY="60")
    stale = enqueue("nobody_serves_this", {}, conn=conn, run_at=datetime.now(UTC) - timedelta(hours=1))
    first = service.run_once()
    assert sorted(m.key for m in first) == ["oldest_ready:nobody_serves_this", "unserved:nobody_serves_this"]
    assert {m.kind for m in first} == {"firing"}
    assert any("waited 60 min" in m.body for m in first)
    assert service.run_once() == []  # the same conditions: nothing new is sent
    assert state_changes.cancel_queued(conn, [stale], "test") == [stale]
    resolved = service.run_once()
    assert sorted((m.kind, m.key) for m in resolved) == [("resolved", "oldest_ready:nobody_serves_this"),
                                                          ("resolved", "unserved:nobody_serves_this")]
    assert len(sent) == 4
    assert scalar(conn, "SELECT count(*) FROM alerts_sent WHERE delivered") == 4


def test_one_worker_at_a_time_runs_the_pass(db_url, conn):
    sent: list[tuple[str, str]] = []
    service = _service(db_url, sent)
    enqueue("nobody_serves_this", {}, conn=conn)
    with psycopg.connect(db_url) as other, other.transaction():
        other.execute("SELECT pg_advisory_xact_lock(hashtext('skiplock:alerts'))")  # another worker's pass
        assert service.run_once() == []
    assert [m.key for m in service.run_once()] == ["unserved:nobody_serves_this"]


def test_a_destination_apprise_cannot_use_is_one_clear_line():
    with pytest.raises(ConfigError, match=r"SKIPLOCK_ALERT_URLS: Apprise cannot use 'nosuchthing://\.\.\.'"):
        apprise_for("nosuchthing://host/path")
    with pytest.raises(ConfigError, match="SKIPLOCK_ALERT_DEAD_COUNT must be a whole number >= 1"):
        AlertSettings.from_env({"SKIPLOCK_ALERT_DEAD_COUNT": "zero"})


def test_a_test_alert_reaches_the_webhook_and_is_recorded(db_url, conn, webhook):
    service = AlertService(lambda: psycopg.connect(db_url, autocommit=True), load_settings({}),
                           AlertSettings.from_env({"SKIPLOCK_ALERT_URLS": webhook.url}))
    assert service.send_test("ada") is None
    assert webhook.count("test alert", "sent by ada")
    assert last_sent(conn)[0][1:3] == ("test", "test")
