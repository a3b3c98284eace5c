"""The rules of pushed alerts: what is wrong right now, as a list of conditions.

Each rule reads the database and returns one Condition per subject it finds in trouble (a queue, or a
doctor check). The alert service (worker/services/alerts.py) compares the list with the one the last
pass found: a new condition is sent as "firing", a gone one as "resolved", and one that persists sends
nothing. Rules are cheap reads that use the indexes the console's pages already use.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

import psycopg

from skiplock.core.plumbing.config import ConfigError, Settings, _number
from skiplock.core.sql import queries
from skiplock.core.status import JobStatus
from skiplock.monitor import doctor, metrics, why

SQL = queries("alerts")


@dataclass(frozen=True)
class AlertSettings:
    """The alert rules' thresholds and destinations (SKIPLOCK_ALERT_*), read from the environment."""

    urls: str = ""  # SKIPLOCK_ALERT_URLS: Apprise URLs (Slack, e-mail, Teams, a webhook ...), space-separated
    dead_count: int = 10  # SKIPLOCK_ALERT_DEAD_COUNT: this many jobs of one queue dying ...
    window: float = 900.0  # SKIPLOCK_ALERT_WINDOW: ... within this many seconds fire; also the reaped runs' window
    oldest_ready: float = 600.0  # SKIPLOCK_ALERT_OLDEST_READY: seconds a ready job may wait before it fires
    interval: float = 30.0  # SKIPLOCK_ALERT_INTERVAL: seconds between passes of the rules
    console_url: str = ""  # SKIPLOCK_CONSOLE_URL: the console's address, so that each alert links to its page

    @property
    def enabled(self) -> bool:
        """Alerts are sent only where SKIPLOCK_ALERT_URLS names a destination."""
        return bool(self.urls.strip())

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AlertSettings:
        """The settings from `env` (default os.environ); a bad value is one ConfigError line."""
        env = os.environ if env is None else env
        values: dict[str, object] = {"urls": env.get("SKIPLOCK_ALERT_URLS", "").strip(),
                                     "console_url": env.get("SKIPLOCK_CONSOLE_URL", "").strip().rstrip("/")}
        numbers = {"SKIPLOCK_ALERT_DEAD_COUNT": ("dead_count", int, 1, "a whole number >= 1"),
                   "SKIPLOCK_ALERT_WINDOW": ("window", float, 1, "seconds >= 1"),
                   "SKIPLOCK_ALERT_OLDEST_READY": ("oldest_ready", float, 1, "seconds >= 1"),
                   "SKIPLOCK_ALERT_INTERVAL": ("interval", float, 0.5, "seconds >= 0.5")}
        for name, (attr, kind, minimum, what) in numbers.items():
            if env.get(name, "").strip():
                values[attr] = _number(name, env[name], kind, minimum, what)
        console = str(values["console_url"])
        if console and not console.startswith(("http://", "https://")):
            raise ConfigError(f"SKIPLOCK_CONSOLE_URL must start with http:// or https://, got {console!r}")
        return cls(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Condition:
    """One thing wrong now: `key` (rule:subject) names it across passes; `link` is the console page to open."""

    rule: str
    subject: str
    summary: str
    link: str
    since: datetime | None = None  # when the data says it began, where it can tell

    @property
    def key(self) -> str:
        return f"{self.rule}:{self.subject}"


# The rules, in the order the Health page lists them: (rule, what it watches, in words).
def describe_rules(alerts: AlertSettings) -> list[tuple[str, str]]:
    """Each rule's name and its condition in plain words, with this deployment's thresholds."""
    window = _duration(alerts.window)
    return [
        ("dead_rise", f"{alerts.dead_count} or more jobs of one queue die within {window}"),
        ("unserved", "a queue has ready jobs and no live worker serves it"),
        ("oldest_ready", f"a queue's oldest ready job has waited over {_duration(alerts.oldest_ready)}"),
        ("doctor", "a check of `skiplock doctor` fails"),
        ("reaped", f"running jobs were reaped within {window}: a worker died mid-run (OOM, SIGKILL)"),
    ]


def dead_rise(conn: psycopg.Connection, alerts: AlertSettings) -> list[Condition]:
    rows = conn.execute(SQL.dead_rise, {"count": alerts.dead_count, "window": alerts.window}).fetchall()
    return [Condition("dead_rise", queue, f"{dead} job(s) of queue {queue!r} died within {_duration(alerts.window)}",
                      f"/dead/?queue={quote(queue)}", since) for queue, dead, since in rows]


def unserved(conn: psycopg.Connection, alerts: AlertSettings) -> list[Condition]:
    return [Condition("unserved", queue, f"queue {queue!r} has {why.describe_count(ready)} ready job(s) and no live "
                      "worker serves it: nothing will run them", "/workers/")
            for queue, ready in why.unserved_queues(conn).items()]


def oldest_ready(conn: psycopg.Connection, alerts: AlertSettings) -> list[Condition]:
    found = []
    for (queue,) in conn.execute(metrics.QUEUES_WITH_STATUS, {"status": JobStatus.QUEUED.value}).fetchall():
        age = metrics.kth_oldest_ready_age(conn, queue, 1)
        if age is not None and age > alerts.oldest_ready:
            found.append(Condition("oldest_ready", queue, f"the oldest ready job of queue {queue!r} has waited "
                                   f"{_duration(age)} (over {_duration(alerts.oldest_ready)})",
                                   f"/queues/{quote(queue)}"))
    return found


def reaped(conn: psycopg.Connection, alerts: AlertSettings) -> list[Condition]:
    rows = conn.execute(SQL.reaped_recently, {"window": alerts.window}).fetchall()
    return [Condition("reaped", queue, f"{count} run(s) of queue {queue!r} were reaped within "
                      f"{_duration(alerts.window)}: a worker is dying mid-run", f"/queues/{quote(queue)}", since)
            for queue, count, since in rows]


def failing_checks(conn: psycopg.Connection, settings: Settings) -> list[Condition]:
    """The doctor's failing checks, but "served queues", which the unserved rule already says per queue."""
    return [Condition("doctor", check.name, f"doctor: {check.name}: {check.verdict}", "/health")
            for check in doctor.run_checks(conn, settings)
            if check.status == doctor.FAIL and check.name != "served queues"]


# The cheap rules run every pass; the doctor's checks (which include an EXPLAIN and catalogue reads) less often.
QUICK_RULES: list[Callable[[psycopg.Connection, AlertSettings], list[Condition]]] = [
    dead_rise, unserved, oldest_ready, reaped]


def _duration(seconds: float) -> str:
    """Seconds in the unit a person reads: 45 s, 15 min, 2 h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
