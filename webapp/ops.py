"""Operations pages: /metrics for Prometheus and /health with the `skiplock doctor` checks.

/metrics is public by the console's allowlist (optionally behind SKIPLOCK_METRICS_TOKEN); the
numbers come from SQL run at scrape time through the console's pool (worker/monitor/metrics.py).
/health shows the same checks as `skiplock doctor`, each with its verdict and what to do.
"""

from __future__ import annotations

from flask import Blueprint, Response
from flask.typing import ResponseReturnValue
from prometheus_client import CONTENT_TYPE_LATEST

from skiplock.core.config import load_settings
from skiplock.monitor.doctor import FAIL, WARN, run_checks
from skiplock.monitor.metrics import SkiplockCollector, render
from skiplock.webapp import db
from skiplock.webapp.web import page

bp = Blueprint("ops", __name__)


@bp.route("/metrics")
def metrics() -> ResponseReturnValue:
    """The Prometheus text exposition of the queue's state, read now."""
    # a collector per scrape: it holds no state, and the console's pool is per app
    body = render(SkiplockCollector(db.connection))
    return Response(body, 200, {"Cache-Control": "no-store"}, content_type=CONTENT_TYPE_LATEST)


@bp.route("/health")
def health() -> ResponseReturnValue:
    """The doctor's checks as a page (or its self-refreshing fragment)."""
    with db.connection() as conn:
        checks = run_checks(conn, load_settings())
    worst = FAIL if any(c.status == FAIL for c in checks) else WARN if any(c.status == WARN for c in checks) else "ok"
    # the union of the detail rows' keys, in first-seen order, is each check's table header
    columns = [list(dict.fromkeys(k for d in c.details for k in d)) for c in checks]
    return page("health.html", "_health.html", checks=checks, columns=columns, worst=worst)
