"""A queue's failure rate over time: failures / runs per bucket over 1 h, 24 h or 7 d,
from the per-minute outcome counts the workers write (job_stats, migration 003).

A failure is a run that raised and was retried or died, or that its worker lost (killed, out of
memory) and the reaper took back (job_stats.retried + dead + reaped); a run is any ended run
(completed + retried + failed + dead + reaped; `failed` is a Discard or a cancel, on purpose).
The same definitions as the overview's "failed today" and "What changed?", so the three agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg

from skiplock.webapp.queries import page_queries
from skiplock.webapp.shared import charts
from skiplock.webapp.shared.chart_ranges import RANGES, buckets_of

# One queue's runs and failures per bucket since the range's first bucket (job_stats_minute_idx).
QUEUE_FAILURES = """
SELECT date_bin(make_interval(secs => %(bucket)s), minute, %(start)s) AS bucket,
       sum(completed + retried + failed + dead + reaped)::bigint AS runs,
       sum(retried + dead + reaped)::bigint AS failures
  FROM job_stats
 WHERE minute >= %(start)s AND queue = %(queue)s
 GROUP BY 1
"""

# The same for buckets of whole hours (7 d): the hourly rollup up to its watermark, then job_stats'
# minutes (page_queries.STATS_RANGE_HOURLY says why; migration 033).
QUEUE_FAILURES_HOURLY = """
SELECT date_bin(make_interval(secs => %(bucket)s), t, %(start)s) AS bucket,
       sum(runs)::bigint AS runs, sum(failures)::bigint AS failures
  FROM (SELECT hour AS t, completed + retried + failed + dead + reaped AS runs, retried + dead + reaped AS failures
          FROM job_stats_hourly
         WHERE queue = %(queue)s AND hour >= %(start)s AND hour < (SELECT until FROM job_stats_rollup)
        UNION ALL
        SELECT minute, completed + retried + failed + dead + reaped, retried + dead + reaped FROM job_stats
         WHERE queue = %(queue)s AND minute >= greatest(%(start)s, (SELECT until FROM job_stats_rollup))) s
 GROUP BY 1
"""


@dataclass(frozen=True)
class FailureRate:
    """A queue's failure-rate chart and its totals over the range."""

    queue: str
    span: str
    chart: charts.Chart
    failures: int
    runs: int
    now: datetime

    @property
    def rate(self) -> float | None:
        """Failures / runs over the whole range, in percent (None without runs)."""
        return 100.0 * self.failures / self.runs if self.runs else None


def for_queue(conn: psycopg.Connection, queue: str, span: str = "1h") -> FailureRate:
    """The failure rate of `queue` per bucket of `span` (one of chart_ranges.RANGES)."""
    now = conn.execute(page_queries.NOW).fetchone()[0]  # type: ignore[index]
    buckets = buckets_of(now, span)
    index = {b: i for i, b in enumerate(buckets)}
    counts = [(0, 0)] * len(buckets)
    seconds = RANGES[span][1]
    sql = QUEUE_FAILURES_HOURLY if seconds % 3600 == 0 else QUEUE_FAILURES
    for bucket, runs, failures in conn.execute(sql, {"bucket": seconds, "start": buckets[0], "queue": queue}):
        i = index.get(bucket)
        if i is not None:
            counts[i] = (int(failures), int(runs))
    chart = charts.rate_bars(counts, buckets, queue, width=1000, height=100)
    return FailureRate(queue, span, chart, sum(f for f, _ in counts), sum(r for _, r in counts), now)
