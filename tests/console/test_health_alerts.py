"""The Health page's pushed alerts: the rules with this deployment's thresholds, the last messages a real
worker sent, and "Send a test alert", which a local webhook (Apprise's json://) receives after a confirmation,
audited; without a destination the page says so and offers no test; a read-only login cannot send one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from skiplock import enqueue
from tests.integration.test_alerts import ALERTING, Webhook
from tests.support.helpers import scalar, wait_for


@pytest.fixture
def hook() -> Iterator[Webhook]:
    """A loopback webhook that keeps what Apprise's json:// posts to it (the alerts' integration tests' own)."""
    server = Webhook()
    yield server
    server.server.shutdown()


def _audit(conn: Any) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT actor, detail FROM audit_log WHERE action = 'send test alert' ORDER BY id").fetchall()


def test_without_a_destination_the_page_says_so_and_sends_nothing(admin: Any, conn: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKIPLOCK_ALERT_URLS", raising=False)
    html = admin.get("/health/").get_data(as_text=True)
    assert 'data-alerts="off"' in html and "No alert destination is configured" in html
    assert 'id="test-alert"' in html and 'title="no destination configured"' in html
    # every rule, in words
    for rule in ("dead_rise", "unserved", "oldest_ready", "doctor", "reaped"):
        assert f'data-rule="{rule}"' in html
    assert "No alert has been sent yet." in html
    refused = admin.post("/health/test-alert", data={"confirm": "yes"}).get_data(as_text=True)
    assert "No alert destination to test" in refused and "SKIPLOCK_ALERT_URLS is not set" in refused
    assert _audit(conn) == []
    assert scalar(conn, "SELECT count(*) FROM alerts_sent") == 0


def test_a_test_alert_is_confirmed_then_reaches_the_webhook_and_is_audited(admin: Any, conn: Any, hook: Webhook,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKIPLOCK_ALERT_URLS", hook.url)
    monkeypatch.setenv("SKIPLOCK_ALERT_DEAD_COUNT", "3")
    html = admin.get("/health/").get_data(as_text=True)
    assert 'data-alerts="on"' in html and "json://\u2026" in html
    assert str(hook.server.server_address[1]) not in html  # a URL's rest may hold a token: never shown
    assert "3 or more jobs of one queue die within 15 min" in html

    confirm = admin.post("/health/test-alert").get_data(as_text=True)
    assert "Send a test alert?" in confirm and 'name="confirm" value="yes"' in confirm
    assert "1 destination(s)" in confirm and "database skiplock" in confirm
    assert hook.messages == []  # nothing sent before the confirmation

    done = admin.post("/health/test-alert", data={"confirm": "yes"})
    assert done.status_code == 303 and done.headers["Location"].endswith("/health/#alerts")
    assert hook.count("skiplock: test alert", "sent by ops-admin") == 1
    page = admin.get("/health/").get_data(as_text=True)
    assert "Test alert sent to 1 destination(s)" in page
    assert 'data-kind="test" data-delivered="yes"' in page
    [(actor, detail)] = _audit(conn)
    assert actor == "ops-admin" and detail["delivered"] is True and detail["destinations"] == ["json://\u2026"]


def test_a_destination_that_does_not_answer_is_reported_not_hidden(admin: Any, conn: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKIPLOCK_ALERT_URLS", "json://127.0.0.1:9/")  # the discard port: nobody listens
    admin.post("/health/test-alert", data={"confirm": "yes"})
    page = admin.get("/health/").get_data(as_text=True)
    assert "The test alert was not delivered" in page and 'data-delivered="no"' in page
    assert _audit(conn)[0][1]["delivered"] is False


def test_a_read_only_login_sees_the_panel_but_cannot_send(viewer: Any, monkeypatch: pytest.MonkeyPatch,
                                                          hook: Webhook) -> None:
    monkeypatch.setenv("SKIPLOCK_ALERT_URLS", hook.url)
    html = viewer.get("/health/").get_data(as_text=True)
    assert 'id="test-alert" disabled title="read-only login"' in html
    assert viewer.post("/health/test-alert", data={"confirm": "yes"}).status_code == 403
    assert hook.messages == []


@pytest.mark.slow
def test_the_last_alerts_a_worker_sent_are_listed(admin: Any, conn: Any, spawn_worker: Any, hook: Webhook) -> None:
    spawn_worker(SKIPLOCK_ALERT_URLS=hook.url, SKIPLOCK_QUEUES="t2", **ALERTING)
    enqueue("t2", {"permanent": True}, conn=conn)
    wait_for(lambda: hook.count("FIRING", "'t2'"), timeout=60, message="the firing alert")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM alerts_sent WHERE key = 'dead_rise:t2'") == 1, timeout=30,
             message="the message recorded")
    html = admin.get("/health/").get_data(as_text=True)
    assert 'data-kind="firing" data-delivered="yes"' in html
    assert "skiplock: 1 job(s) of queue &#39;t2&#39; died within 15 min" in html
