"""Pushed alerts: one worker at a time evaluates the rules and tells the on-call.

Each pass (`run_once`, every SKIPLOCK_ALERT_INTERVAL seconds on the worker's scheduler) takes the alert
lock for its transaction, so whichever worker holds it does the pass and the others skip it. It reads the
rules (worker/monitor/alert_rules.py) and compares them with the conditions the last pass stored in
`alert_conditions`:
- a new condition is stored and sent as FIRING, with what, where, since when and the console's link;
- a condition that persists sends nothing (repeats are held back);
- a stored condition no longer found is deleted and sent as RESOLVED.
The state changes commit before the messages go out, so a slow destination never holds a transaction;
a message that cannot be delivered is recorded with its reason, and not sent again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg

from skiplock.core.plumbing.config import Settings
from skiplock.core.sql import queries
from skiplock.monitor.alert_rules import QUICK_RULES, AlertSettings, Condition, failing_checks
from skiplock.services.alert_delivery import apprise_for, deliver

log = logging.getLogger("skiplock.alerts")
SQL = queries("alerts")
DOCTOR_EVERY_SECONDS = 300.0  # the doctor's checks are heavier than the other rules: every 5 minutes at most


@dataclass(frozen=True)
class Message:
    """One message to send: FIRING or RESOLVED (or a test), for one condition."""

    kind: str
    key: str
    title: str
    body: str


class AlertService:
    """Evaluates the alert rules and sends what changed (see the module docstring)."""

    def __init__(self, connect: Callable[[], AbstractContextManager[psycopg.Connection[Any]]], settings: Settings,
                 alerts: AlertSettings, send: Callable[[str, str], str | None] | None = None,
                 with_doctor: bool = True) -> None:
        self._connect = connect
        self.settings = settings
        self.alerts = alerts
        # the sender: Apprise on SKIPLOCK_ALERT_URLS unless a test gives its own; built (and checked) at start
        if send is None:
            notifier = apprise_for(alerts.urls)
            send = lambda title, body: deliver(notifier, title, body)  # noqa: E731
        self._send = send
        self._with_doctor = with_doctor  # the doctor's checks as a rule (tests of the other rules leave them out)
        self._doctor_at = 0.0
        self._doctor_found: list[Condition] = []

    def run_once(self) -> list[Message]:
        """One pass: the messages it sent (none when another worker holds the lock or nothing changed)."""
        with self._connect() as conn, conn.transaction():
            turn = conn.execute(SQL.take_alert_turn).fetchone()
            if not (turn and turn[0]):
                return []
            messages = list(self._changes(conn, self._conditions(conn)))
        for message in messages:
            self._deliver(message)
        return messages

    def send_test(self, who: str) -> str | None:
        """A test message to every destination (the console's button); None when delivered, else why not."""
        message = Message("test", "test", "skiplock: test alert",
                          f"A test alert sent by {who} from the console. If you read this, alerts reach you.")
        return self._deliver(message)

    def _conditions(self, conn: psycopg.Connection) -> list[Condition]:
        found = [c for rule in QUICK_RULES for c in rule(conn, self.alerts)]
        if self._with_doctor and time.monotonic() - self._doctor_at >= DOCTOR_EVERY_SECONDS:
            with conn.transaction():  # a savepoint: a check that errors must not abort the pass
                self._doctor_found = failing_checks(conn, self.settings)
            self._doctor_at = time.monotonic()
        return found + self._doctor_found

    def _changes(self, conn: psycopg.Connection, found: list[Condition]) -> Iterator[Message]:
        stored = {row[0]: row for row in conn.execute(SQL.open_conditions).fetchall()}
        for condition in found:
            params = {"key": condition.key, "rule": condition.rule, "subject": condition.subject,
                      "summary": condition.summary, "link": condition.link}
            if condition.key in stored:
                conn.execute(SQL.condition_still_seen, params)
                continue
            row = conn.execute(SQL.open_condition, params).fetchone()
            since = condition.since or (row[0] if row else datetime.now(UTC))
            yield Message("firing", condition.key, f"skiplock: {condition.summary}",
                          self._body(condition.summary, since, condition.link, "FIRING"))
        current = {c.key for c in found}
        for key, _rule, _subject, summary, link, since in stored.values():
            if key not in current:
                conn.execute(SQL.close_condition, {"key": key})
                yield Message("resolved", key, f"skiplock: resolved: {summary}",
                              self._body(summary, since, link, "RESOLVED"))

    def _body(self, summary: str, since: datetime, link: str, state: str) -> str:
        where = f"{self.alerts.console_url}{link}" if self.alerts.console_url else f"{link} on the console"
        return (f"{state}: {summary}\nSince: {since.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
                f"\nSee: {where}")

    def _deliver(self, message: Message) -> str | None:
        error = self._send(message.title, message.body)
        if error is None:
            log.info("alert sent: %s", message.title)
        with self._connect() as conn:
            conn.execute(SQL.record_sent, {"kind": message.kind, "key": message.key, "title": message.title,
                                           "body": message.body, "delivered": error is None, "error": error})
        return error


def last_sent(conn: psycopg.Connection, limit: int = 20) -> list[tuple[Any, ...]]:
    """The last alert messages, newest first (sent_at, kind, key, title, body, delivered, error)."""
    return conn.execute(SQL.last_sent, {"limit": limit}).fetchall()
