"""What the Health page's pushed-alerts panel shows (the test button's POST is webapp/pages/health_alerts.py's).

The console reads SKIPLOCK_ALERT_* from its own environment, as the workers do: the rules it lists are
the thresholds a console started with the workers' settings shares with them, and the test goes to the
destinations the console was given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skiplock.core.errors import ConfigError
from skiplock.monitor.alert_rules import AlertSettings, describe_rules
from skiplock.services.alerts import last_sent
from skiplock.webapp import db

LAST_SENT = 10  # the messages the panel lists, newest first


@dataclass(frozen=True)
class AlertsPanel:
    """What the panel shows: the rules in words, the destinations by kind only, the last messages."""

    rules: list[tuple[str, str]]
    destinations: list[str]  # each URL's scheme ("slack://…"): the rest may hold a token or a password
    problem: str | None  # a setting the workers would refuse too, in its own words
    sent: list[dict[str, Any]]


def alert_settings() -> tuple[AlertSettings, str | None]:
    """The settings from the console's environment, and the message for a bad one (then the defaults)."""
    try:
        return AlertSettings.from_env(), None
    except ConfigError as exc:
        return AlertSettings(), str(exc)


def destinations(alerts: AlertSettings) -> list[str]:
    """Each destination by its kind only: a URL's path and query may hold a webhook token or a password."""
    return [url.split("://", 1)[0] + "://\u2026" if "://" in url else "(not a URL)" for url in alerts.urls.split()]


def panel() -> AlertsPanel:
    """The panel for the Health page, read now."""
    alerts, problem = alert_settings()
    with db.connection() as conn:
        rows = last_sent(conn, LAST_SENT)
    names = ("sent_at", "kind", "key", "title", "body", "delivered", "error")
    return AlertsPanel(describe_rules(alerts), destinations(alerts), problem,
                       [dict(zip(names, row, strict=True)) for row in rows])
