"""Overview: one row per queue with ready, scheduled, running, dead, oldest ready age, p99 wait,
completed per minute and a chart of the last hour."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from flask import Blueprint
from flask.typing import ResponseReturnValue

from skiplock.webapp import charts, db, queries
from skiplock.webapp.web import page

bp = Blueprint("overview", __name__)

# Counts stop here and show as "10,000+": an exact count of a million-row queue would scan it.
COUNT_CAP = 10_000
# The p99 sample of a big queue aims at this many rows of the jobs table (a few ms of block reads).
P99_SAMPLE_ROWS = 5_000
MAX_QUEUES = 200


@dataclass
class QueueRow:
    """The overview numbers of one queue."""

    queue: str
    ready: int
    scheduled: int
    running: int
    dead: int
    oldest_ready_s: float | None
    p99_wait_s: float | None
    p99_estimated: bool
    paused: bool
    per_minute: float
    chart: list[charts.Bar]


def capped(n: int, cap: int | None = None) -> str:
    """A count for display: exact up to the cap, "10,000+" above it."""
    cap = COUNT_CAP if cap is None else cap
    return f"{cap:,}+" if n > cap else f"{n:,}"


def _p99(conn: psycopg.Connection, queue: str, ready: int) -> tuple[float | None, bool]:
    if ready == 0:
        return None, False
    if ready <= COUNT_CAP:
        row = conn.execute(queries.P99_WAIT_EXACT, {"queue": queue, "cap": COUNT_CAP}).fetchone()
        return (float(row[0]) if row and row[0] is not None else None), False
    total = conn.execute(queries.JOBS_ESTIMATE).fetchone()
    percent = min(100.0, 100.0 * P99_SAMPLE_ROWS / max(int(total[0]) if total else 1, 1))
    row = conn.execute(queries.P99_WAIT_SAMPLED, {"queue": queue, "percent": percent}).fetchone()
    return (float(row[0]) if row and row[0] is not None else None), True


def _minutes(now: datetime) -> list[datetime]:
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=59)
    return [start + timedelta(minutes=i) for i in range(60)]


def queue_rows(conn: psycopg.Connection) -> tuple[list[QueueRow], list[charts.Bar], datetime]:
    """Every queue's row, the all-queues chart of the last hour, and the database's now()."""
    now = conn.execute(queries.NOW).fetchone()[0]  # type: ignore[index]
    names = [r[0] for r in conn.execute(queries.QUEUE_NAMES, {"limit": MAX_QUEUES})]
    minutes = _minutes(now)
    index = {m: i for i, m in enumerate(minutes)}
    series: dict[str, list[int]] = {}
    total = [0] * 60
    for queue, minute, completed, _dead, _retried in conn.execute(queries.STATS_LAST_HOUR):
        i = index.get(minute)
        if i is not None:
            series.setdefault(queue, [0] * 60)[i] += int(completed)
            total[i] += int(completed)
    labels = [m.strftime("%H:%M") for m in minutes]
    rows = []
    for name in names:
        stats: Any = conn.execute(queries.QUEUE_STATS, {"queue": name, "cap": COUNT_CAP}).fetchone()
        ready, scheduled, running, dead, oldest, paused = stats
        p99, estimated = _p99(conn, name, ready)
        values = series.get(name, [0] * 60)
        # the current minute is still filling up; the rate is the mean of the 5 full minutes before it
        per_minute = sum(values[-6:-1]) / 5.0
        rows.append(QueueRow(name, ready, scheduled, running, dead, None if oldest is None else float(oldest),
                             p99, estimated, paused, per_minute, charts.bars(values, labels)))
    return rows, charts.bars(total, labels, width=600, height=60), now


@bp.route("/")
def index() -> ResponseReturnValue:
    """The overview page (or its live fragment)."""
    with db.connection() as conn:
        rows, total_chart, now = queue_rows(conn)
    return page("overview.html", "_overview.html", rows=rows, total_chart=total_chart, now=now,
                capped=capped, cap=COUNT_CAP)
