"""Operations pages: /metrics for Prometheus and /health with the `skiplock doctor` checks.

/metrics is public by the console's allowlist (optionally behind SKIPLOCK_METRICS_TOKEN); the
numbers come from SQL run at scrape time through the console's pool (worker/monitor/metrics.py).
/health shows the same checks as `skiplock doctor`, each with its verdict and what to do, and below them
the pushed alerts' rules, last messages and test button (webapp/shared/alerts_panel.py).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from flask import Blueprint, Response, current_app
from flask.typing import ResponseReturnValue
from prometheus_client import CONTENT_TYPE_LATEST
from psycopg.rows import dict_row

from skiplock.core.plumbing.config import load_settings
from skiplock.core.sql import queries
from skiplock.monitor.doctor import FAIL, WARN, Check, run_checks
from skiplock.monitor.metrics import SkiplockCollector, render
from skiplock.webapp import db
from skiplock.webapp.shared import alerts_panel
from skiplock.webapp.web import is_htmx, page

bp = Blueprint("ops", __name__)


@bp.route("/metrics")
def metrics() -> ResponseReturnValue:
    """The Prometheus text exposition of the queue's state, read now."""
    # a collector per scrape: it holds no state, and the console's pool is per app
    body = render(SkiplockCollector(db.connection))
    return Response(body, 200, {"Cache-Control": "no-store"}, content_type=CONTENT_TYPE_LATEST)


# "/health/" like every other page; "/health" (the old address, bookmarks) answers too, without a redirect
@bp.route("/health/", strict_slashes=False)
def health() -> ResponseReturnValue:
    """The doctor's checks as a page (or its self-refreshing fragment), the verdict first."""
    checks = _run_and_remember()
    worst = _worst(checks)
    # the alerts panel is on the page only: the self-refreshing fragment is the checks
    alerts = None if is_htmx() else alerts_panel.panel()
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:  # the audit trail's login throttles
        throttles = cur.execute(LOGIN_THROTTLE.recent_throttles, {"hours": THROTTLE_HOURS, "limit": THROTTLES_SHOWN,
                                                                  "scan": AUDIT_SCAN}).fetchall()
    return page("ops/health.html", "ops/_health.html", checks=checks, tables=[_tables(c) for c in checks], worst=worst,
                alerts=alerts,
                failing=[c.name for c in checks if c.status == FAIL],
                warning=[c.name for c in checks if c.status == WARN], throttles=throttles,
                throttle_hours=THROTTLE_HOURS)


# Health lists the login throttles of this many hours, at most THROTTLES_SHOWN of them, found among the newest
# AUDIT_SCAN audit rows (the Audit page has them all).
THROTTLE_HOURS = 24
THROTTLES_SHOWN = 10
AUDIT_SCAN = 10_000
LOGIN_THROTTLE = queries("login_throttle")


@bp.route("/health/badge")
def badge() -> ResponseReturnValue:
    """The nav link's badge: the worst status of the checks, at most BADGE_TTL seconds old (the checks run
    EXPLAIN and pg_stat reads: too much for every page view, so pages load the badge on their own)."""
    cached = _last.get(id(current_app))
    checks = cached[1] if cached and time.monotonic() - cached[0] < BADGE_TTL else _run_and_remember()
    worst = _worst(checks)
    bad = sum(1 for c in checks if c.status == worst) if worst != "ok" else 0
    return page("ops/_health_badge.html", "ops/_health_badge.html", worst=worst, bad=bad)


BADGE_TTL = 15.0  # seconds a nav badge may lag the Health page
_last: dict[int, tuple[float, list[Check]]] = {}  # app id -> (monotonic time, checks): one entry per app
_lock = threading.Lock()


def _run_and_remember() -> list[Check]:
    with db.connection(primary=True) as conn:  # the checks describe the primary, where the queue runs
        checks = run_checks(conn, load_settings())
    with _lock:
        _last[id(current_app)] = (time.monotonic(), checks)
    return checks


def _worst(checks: list[Check]) -> str:
    return FAIL if any(c.status == FAIL for c in checks) else WARN if any(c.status == WARN for c in checks) else "ok"


def _tables(check: Check) -> list[dict[str, Any]]:
    """A check's detail rows as tables, one per kind of row (rows with the same keys): settings and index
    sizes, or stopped workers and reaped counts, are different tables, not one with empty cells."""
    tables: list[dict[str, Any]] = []
    for row in check.details:
        keys = list(row)
        if not tables or tables[-1]["keys"] != keys:
            tables.append({"keys": keys, "rows": []})
        tables[-1]["rows"].append(row)
    return tables
