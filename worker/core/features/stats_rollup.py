"""job_stats summed per closed hour (migration 033), so a 7-day chart reads 168 rows a queue, not 10,080 a worker.

The pruner calls `roll_up` every minute. Each call sums the job_stats minutes from the watermark
(job_stats_rollup.until) to the start of the last closed hour into job_stats_hourly and moves the
watermark there, in one transaction that holds the watermark's row lock, so workers running the pruner
at the same time add each hour once. An hour counts as closed GRACE after it ended: workers write the
minute of their ack batch, and a batch that began in the last minute of an hour may commit in the
next. Readers (webapp/queries/page_queries.py STATS_RANGE_HOURLY, webapp/shared/failure_rate.py) take the hours
before the watermark from job_stats_hourly and later minutes from job_stats.

Hours are whole UTC hours (date_bin from a fixed origin, not date_trunc, which follows the session's
TimeZone: Asia/Kolkata's hours start at :30 UTC), aligned with the console's 2-hour buckets.
"""

from __future__ import annotations

import psycopg

# An hour is rolled up this long after it ended (see above).
GRACE_SECONDS = 300
# At most this many hours per call: the first call on a database with 8 days of stats works them off
# over a few minutes instead of in one long statement.
MAX_HOURS = 48

# The watermark's row, made on first use at the oldest stats hour (or now's hour on an empty table).
START = """
INSERT INTO job_stats_rollup (one, until)
SELECT true, coalesce(date_bin('1 hour', min(minute), timestamptz '2000-01-01 00:00+00'),
                      date_bin('1 hour', now(), timestamptz '2000-01-01 00:00+00'))
  FROM job_stats
 WHERE NOT EXISTS (SELECT 1 FROM job_stats_rollup)
ON CONFLICT (one) DO NOTHING
"""

# Sum [until, target) into hours and move the watermark to target; nothing when no hour closed since.
# The row lock (FOR UPDATE) makes a concurrent caller wait and then find the watermark moved.
ROLL_UP = """
WITH w AS (
    SELECT until, least(date_bin('1 hour', now() - make_interval(secs => %(grace)s), timestamptz '2000-01-01 00:00+00'),
                        until + make_interval(hours => %(max_hours)s)) AS target
      FROM job_stats_rollup FOR UPDATE
), added AS (
    INSERT INTO job_stats_hourly AS h (hour, queue, completed, retried, failed, dead, reaped)
    SELECT date_bin('1 hour', s.minute, timestamptz '2000-01-01 00:00+00'), s.queue,
           sum(s.completed), sum(s.retried), sum(s.failed), sum(s.dead), sum(s.reaped)
      FROM job_stats s
     -- scalar subqueries: constants for the plan, a range of job_stats_minute_idx (a join with w
     -- read all of job_stats on every call)
     WHERE s.minute >= (SELECT until FROM w) AND s.minute < (SELECT target FROM w)
     GROUP BY 1, 2
    -- sums of whole hours: replaced, never added to, so a watermark moved back by hand counts nothing twice
    ON CONFLICT (hour, queue) DO UPDATE SET completed = EXCLUDED.completed, retried = EXCLUDED.retried,
                                            failed = EXCLUDED.failed, dead = EXCLUDED.dead, reaped = EXCLUDED.reaped
    RETURNING 1
), moved AS (
    UPDATE job_stats_rollup r SET until = w.target FROM w WHERE w.target > w.until RETURNING 1
)
SELECT (SELECT count(*) FROM added), (SELECT count(*) FROM moved)
"""

PRUNE = """
DELETE FROM job_stats_hourly WHERE ctid = ANY (ARRAY(SELECT ctid FROM job_stats_hourly
                                                      WHERE hour < now() - make_interval(secs => %(older_than)s)
                                                      LIMIT %(limit)s))
"""


def roll_up(conn: psycopg.Connection, grace: float = GRACE_SECONDS, max_hours: int = MAX_HOURS) -> int:
    """Add the hours closed since the last call to job_stats_hourly; returns how many (hour, queue) rows."""
    with conn.transaction():
        conn.execute(START)
        row = conn.execute(ROLL_UP, {"grace": grace, "max_hours": max_hours}).fetchone()
    return int(row[0]) if row else 0


def prune(conn: psycopg.Connection, older_than: float, limit: int) -> int:
    """Delete up to `limit` hourly rows older than `older_than` seconds (SKIPLOCK_STATS_RETENTION)."""
    return conn.execute(PRUNE, {"older_than": older_than, "limit": limit}).rowcount
