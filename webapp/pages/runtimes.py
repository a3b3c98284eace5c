"""Run times: p50, p95 and max of each queue's handler (a queue has one task) over 1 h, 24 h or 7 d,
from the per-minute histograms the workers save (worker/core/features/run_times.py, migration 028)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint
from flask.typing import ResponseReturnValue

from skiplock.webapp import db, filters
from skiplock.webapp.shared.run_times import run_times
from skiplock.webapp.web import page

bp = Blueprint("runtimes", __name__, url_prefix="/runtimes")

RANGES = {"1h": 3600, "24h": 86400, "7d": 7 * 86400}


@bp.route("/")
def index() -> ResponseReturnValue:
    """The run-time table for one range."""
    span = filters.choice(filters.arg("range"), tuple(RANGES), "1h", "range")
    queue = filters.queue(filters.arg("queue"))
    with db.connection() as conn:
        rows: list[Any] = run_times(conn, RANGES[span], queue)
    return page("runtimes/runtimes.html", "runtimes/_runtimes.html", rows=rows, span=span, ranges=RANGES,
                queue=queue or "")
