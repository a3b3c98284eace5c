"""Run times: p50, p95 and max of each queue's handler (a queue has one task) over 1 h, 24 h or 7 d,
from the per-minute histograms the workers save (worker/core/features/run_times.py, migration 028)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from flask import Blueprint
from flask.typing import ResponseReturnValue

from skiplock.core.features.run_times import percentile
from skiplock.webapp import db, filters, page_queries
from skiplock.webapp.web import page

bp = Blueprint("runtimes", __name__, url_prefix="/runtimes")

RANGES = {"1h": 3600, "24h": 86400, "7d": 7 * 86400}


@dataclass(frozen=True)
class RunTime:
    """One queue's run times over a range; p50 and p95 are estimates inside their histogram bucket."""

    queue: str
    runs: int
    mean_s: float
    p50_s: float | None
    p95_s: float | None
    max_s: float


def run_times(conn: psycopg.Connection, seconds: int, queue: str | None = None) -> list[RunTime]:
    """Each queue's run times over the last `seconds` (only queues that ran something)."""
    out = []
    for name, counts, runs, sum_s, max_s in conn.execute(page_queries.RUN_TIMES, {"seconds": seconds, "queue": queue}):
        counts = [int(c) for c in counts]
        out.append(RunTime(name, int(runs), float(sum_s) / max(int(runs), 1), percentile(counts, 0.5, float(max_s)),
                           percentile(counts, 0.95, float(max_s)), float(max_s)))
    return out


def p95_by_queue(conn: psycopg.Connection, seconds: int = 3600) -> dict[str, float]:
    """queue -> p95 run time over the last `seconds`, for Long-runners' comparison."""
    return {r.queue: r.p95_s for r in run_times(conn, seconds) if r.p95_s}


@bp.route("/")
def index() -> ResponseReturnValue:
    """The run-time table for one range."""
    span = filters.choice(filters.arg("range"), tuple(RANGES), "1h", "range")
    queue = filters.queue(filters.arg("queue"))
    with db.connection() as conn:
        rows: list[Any] = run_times(conn, RANGES[span], queue)
    return page("runtimes.html", "_runtimes.html", rows=rows, span=span, ranges=RANGES, queue=queue or "")
