"""Overview: a summary line (today's runs, what waits, jobs/s now), then one row per queue with
ready, scheduled, running, parked and dead (each linking to its list), oldest ready age, p99 wait, a flag
when no live worker serves it, and succeeded/retried/dead charts over 1 h, 24 h or 7 d."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from flask import Blueprint
from flask.typing import ResponseReturnValue

from skiplock.core.durable import service as durable_service
from skiplock.core.status import LIVE_WORKER_SECONDS
from skiplock.monitor import why
from skiplock.webapp import db, filters
from skiplock.webapp.queries import page_queries
from skiplock.webapp.shared import charts, counts
from skiplock.webapp.shared.chart_ranges import RANGES, buckets_of
from skiplock.webapp.web import page

bp = Blueprint("overview", __name__)

# The p99 sample of a big queue aims at this many rows of the jobs table: a bounded read of blocks.
P99_SAMPLE_ROWS = 5_000
MAX_QUEUES = 200


# The "retrying" figure reads at most this many scheduled jobs.
RETRYING_SCAN = 50_000


@dataclass
class QueueRow:
    """The overview numbers of one queue."""

    queue: str
    ready: int
    scheduled: int
    running: int
    dead: int
    parked: int  # durable jobs sleeping or waiting for a signal: neither ready nor scheduled
    oldest_ready_s: float | None
    p99_wait_s: float | None
    p99_estimated: bool
    paused: bool
    unserved: bool
    per_minute: float
    series: dict[str, list[int]]
    chart: charts.Chart | None = None


@dataclass
class Summary:
    """The line over the table, like Sidekiq's: today's runs, what waits, and the rate right now."""

    processed_today: int
    failed_today: int
    retrying: int
    retrying_partial: bool
    ready: int
    scheduled: int  # enqueued to run later; the jobs waiting to retry are `retrying`, not in it
    running: int
    dead: int
    parked: int
    capped: bool
    jobs_per_s: float
    workers_live: int = 0
    workers_stale: int = 0


def _p99(conn: psycopg.Connection, queue: str, ready: int) -> tuple[float | None, bool]:
    if ready == 0:
        return None, False
    if ready <= counts.COUNT_CAP:
        row = conn.execute(page_queries.P99_WAIT_EXACT, {"queue": queue, "cap": counts.COUNT_CAP}).fetchone()
        return (float(row[0]) if row and row[0] is not None else None), False
    total = conn.execute(page_queries.JOBS_ESTIMATE).fetchone()
    percent = min(100.0, 100.0 * P99_SAMPLE_ROWS / max(int(total[0]) if total else 1, 1))
    row = conn.execute(page_queries.P99_WAIT_SAMPLED, {"queue": queue, "percent": percent}).fetchone()
    return (float(row[0]) if row and row[0] is not None else None), True


def _empty(n: int) -> dict[str, list[int]]:
    return {name: [0] * n for name in charts.SERIES}


def _stats(conn: psycopg.Connection, buckets: list[datetime], seconds: int) -> dict[str, dict[str, list[int]]]:
    """Queue -> series -> counts per bucket."""
    index = {b: i for i, b in enumerate(buckets)}
    out: dict[str, dict[str, list[int]]] = {}
    # buckets of whole hours (7 d) read the hourly rollup: 168 rows a queue instead of 10,080 per worker
    sql = page_queries.STATS_RANGE_HOURLY if seconds % 3600 == 0 else page_queries.STATS_RANGE
    for queue, bucket, *values in conn.execute(sql, {"bucket": seconds, "start": buckets[0]}):
        i = index.get(bucket)
        if i is None:
            continue
        series = out.setdefault(queue, _empty(len(buckets)))
        for name, value in zip(charts.SERIES, values, strict=True):
            series[name][i] += int(value)
    return out


def _per_minute(series: dict[str, list[int]], seconds: int) -> float:
    """Succeeded per minute over the last five full buckets (the current one is still filling up)."""
    done = series["succeeded"][-6:-1]
    return sum(done) / len(done) / (seconds / 60.0) if done else 0.0


def queue_rows(conn: psycopg.Connection, span: str = "1h") -> tuple[list[QueueRow], charts.Chart, datetime]:
    """Every queue's row with its chart on one shared scale, the all-queues chart, and the database's now()."""
    now = conn.execute(page_queries.NOW).fetchone()[0]  # type: ignore[index]
    names = [r[0] for r in conn.execute(page_queries.QUEUE_NAMES, {"limit": MAX_QUEUES})]
    parked = durable_service.parked_counts(conn)
    # a queue whose every job is parked has a row too
    names = sorted(set(names) | set(parked))[:MAX_QUEUES]
    buckets = buckets_of(now, span)
    seconds = RANGES[span][1]
    stats = _stats(conn, buckets, seconds)
    unserved = why.unserved_queues(conn)
    total = _empty(len(buckets))
    for series in stats.values():
        for name in charts.SERIES:
            total[name] = [a + b for a, b in zip(total[name], series[name], strict=True)]
    rows = []
    for name in names:
        row: Any = conn.execute(page_queries.QUEUE_STATS, {"queue": name, "cap": counts.COUNT_CAP}).fetchone()
        ready, scheduled, running, dead, oldest, paused = row
        p99, estimated = _p99(conn, name, ready)
        series = stats.get(name, _empty(len(buckets)))
        rows.append(QueueRow(name, ready, scheduled, running, dead, parked.get(name, 0),
                             None if oldest is None else float(oldest),
                             p99, estimated, paused, name in unserved, _per_minute(series, seconds), series))
    # each sparkline on its own scale (printed beside it): on one shared scale a queue of 10 jobs a
    # minute beside one of 10,000 drew nothing at all, failures included
    for r in rows:
        r.chart = charts.stacked(r.series, buckets, r.queue, width=180, height=28, ticks=2)
    # the big chart is drawn 1,000 units wide and scaled to the page by CSS
    return rows, charts.stacked(total, buckets, "all queues", width=1000, height=150), now


def _retrying(conn: psycopg.Connection, rows: list[QueueRow]) -> tuple[int, bool]:
    """Scheduled jobs waiting for a retry in the queues shown, and whether the count stopped at
    RETRYING_SCAN scheduled jobs read (a queue without scheduled jobs costs no query)."""
    budget, retrying = RETRYING_SCAN, 0
    for row in rows:
        if row.scheduled == 0:
            continue
        if budget <= 0:
            return retrying, True
        found, read = conn.execute(page_queries.RETRYING_IN_QUEUE, {"queue": row.queue, "scan": budget}
                                   ).fetchone()  # type: ignore[misc]
        retrying, budget = retrying + int(found), budget - int(read)
    return retrying, budget <= 0


def summary(conn: psycopg.Connection, rows: list[QueueRow]) -> Summary:
    """Totals over the queues (capped counts summed) plus today's runs and the live rate."""
    today: Any = conn.execute(page_queries.TODAY).fetchone()
    retrying, retrying_partial = _retrying(conn, rows)
    cur, prev, into = conn.execute(page_queries.LIVE_RATE).fetchone()  # type: ignore[misc]
    # the last 60 s: this minute so far, plus the part of the previous minute still inside the window
    rate = (float(cur) + float(prev) * max(60.0 - float(into), 0.0) / 60.0) / 60.0
    live, stale = conn.execute(page_queries.WORKER_COUNTS, {"live": LIVE_WORKER_SECONDS}).fetchone()  # type: ignore[misc]
    # "scheduled" beside "waiting to retry" counts the jobs enqueued to run later, not those retries again
    scheduled = max(sum(r.scheduled for r in rows) - retrying, 0)
    return Summary(int(today[0]), int(today[1]), retrying, retrying_partial,
                   sum(r.ready for r in rows), scheduled, sum(r.running for r in rows),
                   sum(r.dead for r in rows), sum(r.parked for r in rows),
                   any(max(r.ready, r.scheduled, r.dead) > counts.COUNT_CAP for r in rows), rate, int(live), int(stale))


@bp.route("/")
def index() -> ResponseReturnValue:
    """The overview page (or its live fragment)."""
    span = filters.choice(filters.arg("range"), tuple(RANGES), "1h", "range")
    with db.connection() as conn:
        rows, total_chart, now = queue_rows(conn, span)
        totals = summary(conn, rows)
    return page("overview/overview.html", "overview/_overview.html", rows=rows, total_chart=total_chart, now=now,
                capped=counts.capped, cap=counts.COUNT_CAP, summary=totals, span=span, ranges=RANGES)
