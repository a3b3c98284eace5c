"""The console's read-only SQL, one named statement per view need. Nothing here changes a job.

Big-table rules: every statement walks a partial index (jobs_ready_idx for queued,
jobs_lease_idx for running, jobs_finished_idx for dead/failed/succeeded), counts are capped
(LIMIT cap+1 inside the count), and lists use keyset pagination, never OFFSET.
"""

from __future__ import annotations

from worker import queries as _core_queries

# Every queue worth an overview row: queues with queued or dead jobs (loose index scans that
# jump from one queue name to the next instead of reading every row), running jobs, paused
# queues, queues with recent stats, and queues a live worker serves.
QUEUE_NAMES = """
WITH RECURSIVE queued_q AS (
    (SELECT queue FROM jobs WHERE status = 'queued' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM jobs j WHERE j.status = 'queued' AND j.queue > q.queue
             ORDER BY j.queue LIMIT 1)
      FROM queued_q q WHERE q.queue IS NOT NULL
), dead_q AS (
    (SELECT queue FROM jobs WHERE status = 'dead' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM jobs j WHERE j.status = 'dead' AND j.queue > q.queue
             ORDER BY j.queue LIMIT 1)
      FROM dead_q q WHERE q.queue IS NOT NULL
)
SELECT queue FROM queued_q WHERE queue IS NOT NULL
UNION SELECT queue FROM dead_q WHERE queue IS NOT NULL
UNION SELECT queue FROM jobs WHERE status = 'running'
UNION SELECT queue FROM paused_queues
UNION SELECT queue FROM job_stats WHERE minute >= now() - interval '1 hour'
UNION SELECT unnest(queues) FROM workers
ORDER BY 1
LIMIT %(limit)s
"""

# One queue's overview numbers. Counts stop at %(cap)s + 1 rows so a million-row queue costs a
# bounded index walk. Oldest ready: the first run_at of each priority (a loose scan over the few
# distinct priorities of jobs_ready_idx), then the smallest of those that is due.
QUEUE_STATS = """
WITH RECURSIVE prios AS (
    (SELECT priority FROM jobs WHERE queue = %(queue)s AND status = 'queued'
      ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM jobs j WHERE j.queue = %(queue)s AND j.status = 'queued'
              AND j.priority < p.priority ORDER BY j.priority DESC LIMIT 1)
      FROM prios p WHERE p.priority IS NOT NULL
)
SELECT
    (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE queue = %(queue)s AND status = 'queued'
                            AND run_at <= now() LIMIT %(cap)s + 1) s) AS ready,
    (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE queue = %(queue)s AND status = 'queued'
                            AND run_at > now() LIMIT %(cap)s + 1) s) AS scheduled,
    (SELECT count(*) FROM jobs WHERE status = 'running' AND queue = %(queue)s) AS running,
    (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'dead' AND queue = %(queue)s
                            LIMIT %(cap)s + 1) s) AS dead,
    (SELECT extract(epoch FROM now() - min(
         (SELECT j.run_at FROM jobs j WHERE j.queue = %(queue)s AND j.status = 'queued'
             AND j.priority = p.priority AND j.run_at <= now() ORDER BY j.run_at LIMIT 1)))
       FROM prios p WHERE p.priority IS NOT NULL) AS oldest_ready_s,
    EXISTS (SELECT 1 FROM paused_queues WHERE queue = %(queue)s) AS paused
"""

# p99 wait of ready jobs (the seed's "aging ready work", limited to due jobs), exact for a
# queue with at most %(cap)s ready jobs...
P99_WAIT_EXACT = """
SELECT extract(epoch FROM percentile_disc(0.99) WITHIN GROUP (ORDER BY now() - run_at))
  FROM (SELECT run_at FROM jobs WHERE queue = %(queue)s AND status = 'queued' AND run_at <= now()
         LIMIT %(cap)s + 1) s
"""

# ...and estimated from a block sample of the table for bigger ones (shown with a ≈).
P99_WAIT_SAMPLED = """
SELECT extract(epoch FROM percentile_disc(0.99) WITHIN GROUP (ORDER BY now() - run_at))
  FROM jobs TABLESAMPLE SYSTEM (%(percent)s)
 WHERE queue = %(queue)s AND status = 'queued' AND run_at <= now()
"""

# The planner's row estimate of jobs, to size the sample above.
JOBS_ESTIMATE = "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'jobs'::regclass"

# Completed and dead per queue per minute over the last hour (job_stats is summed over workers).
STATS_LAST_HOUR = """
SELECT queue, minute, sum(completed)::bigint AS completed, sum(dead)::bigint AS dead,
       sum(retried)::bigint AS retried
  FROM job_stats
 WHERE minute >= date_trunc('minute', now()) - interval '59 minutes'
 GROUP BY queue, minute
"""

# The database's clock, so every age on a page is measured from the same instant.
NOW = "SELECT now()"

# ---- queue page: one status, keyset pages -----------------------------------------------------

_JOB_COLUMNS = """id, queue, status::text, priority, run_at, created_at, started_at, finished_at,
       lease_until, attempts, max_attempts, unique_key, worker_id,
       split_part(coalesce(last_error, ''), E'\\n', 1) AS error_line, left(payload::text, 200) AS payload_head"""

# Filters shared by the list statements: text in unique_key/payload/last_error, one id.
_LIST_FILTERS = """
  AND (%(id)s::bigint IS NULL OR id = %(id)s::bigint)
  AND (%(text)s::text IS NULL OR unique_key ILIKE %(text)s::text OR payload::text ILIKE %(text)s::text
       OR last_error ILIKE %(text)s::text)
"""

# Ready jobs in claim order (priority DESC, run_at, id), after the cursor.
LIST_READY = f"""
SELECT {_JOB_COLUMNS} FROM jobs
 WHERE queue = %(queue)s AND status = 'queued' AND run_at <= now() {_LIST_FILTERS}
   AND (%(c_id)s::bigint IS NULL OR priority < %(c_prio)s
        OR (priority = %(c_prio)s AND (run_at, id) > (%(c_time)s::timestamptz, %(c_id)s::bigint)))
 ORDER BY priority DESC, run_at, id
 LIMIT %(limit)s
"""

# Scheduled (future) jobs in the same order.
LIST_SCHEDULED = LIST_READY.replace("run_at <= now()", "run_at > now()")

# Running jobs, longest-running first, after the cursor.
LIST_RUNNING = f"""
SELECT {_JOB_COLUMNS} FROM jobs
 WHERE queue = %(queue)s AND status = 'running' {_LIST_FILTERS}
   AND (%(c_id)s::bigint IS NULL OR (started_at, id) > (%(c_time)s::timestamptz, %(c_id)s::bigint))
 ORDER BY started_at, id
 LIMIT %(limit)s
"""

# Finished jobs of one status, newest first, after the cursor (jobs_finished_idx order).
LIST_FINISHED = f"""
SELECT {_JOB_COLUMNS} FROM jobs
 WHERE status = %(status)s::job_status AND queue = %(queue)s {_LIST_FILTERS}
   AND (%(c_id)s::bigint IS NULL OR (finished_at, id) < (%(c_time)s::timestamptz, %(c_id)s::bigint))
 ORDER BY finished_at DESC, id DESC
 LIMIT %(limit)s
"""

# ---- long-runners -----------------------------------------------------------------------------

# Running jobs by runtime (the seed's long-runners, including expired leases the reaper is about to take).
LONG_RUNNERS = """
SELECT id, queue, extract(epoch FROM now() - started_at) AS runtime_s, attempts, max_attempts, worker_id,
       extract(epoch FROM lease_until - now()) AS lease_left_s, left(payload::text, 120) AS payload_head
  FROM jobs
 WHERE status = 'running' AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
 ORDER BY started_at, id
 LIMIT %(limit)s
"""

# ---- dead letters -----------------------------------------------------------------------------

# Dead jobs grouped by queue and the first line of last_error over the window, biggest first.
DEAD_GROUPS = """
SELECT queue, split_part(coalesce(last_error, ''), E'\\n', 1) AS error, count(*) AS n,
       max(finished_at) AS last_at
  FROM jobs
 WHERE status = %(status)s::job_status
   AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s::timestamptz)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
 GROUP BY 1, 2
 ORDER BY n DESC, queue, error
 LIMIT %(limit)s
"""

# ---- one job, workers ---------------------------------------------------------------------------

JOB = """
SELECT id, queue, status::text, priority, run_at, created_at, started_at, finished_at, lease_until,
       attempts, max_attempts, unique_key, worker_id, last_error, jsonb_pretty(payload) AS payload,
       run_at > now() AS scheduled
  FROM jobs WHERE id = %(id)s
"""

# Live and recently seen workers; `stale` when the heartbeat is older than %(stale_after)s seconds.
WORKERS = """
SELECT id, host, pid, queues, concurrency, in_flight, started_at, last_seen,
       extract(epoch FROM now() - last_seen) AS seen_ago_s,
       last_seen < now() - make_interval(secs => %(stale_after)s) AS stale
  FROM workers
 ORDER BY stale, host, pid
 LIMIT 500
"""

# Dead (or failed) jobs matching the bulk-action filter, newest first, after the cursor. The same
# WHERE as the core's "all matching" actions, so the list shows exactly what a bulk action covers.
FINISHED_MATCH_LIST = f"""
SELECT {_JOB_COLUMNS} FROM jobs
 WHERE {_core_queries.FINISHED_MATCH}
   AND (%(c_id)s::bigint IS NULL OR (finished_at, id) < (%(c_time)s::timestamptz, %(c_id)s::bigint))
 ORDER BY finished_at DESC, id DESC
 LIMIT %(limit)s
"""

# Whether workers skip this queue.
IS_PAUSED = "SELECT EXISTS (SELECT 1 FROM paused_queues WHERE queue = %(queue)s)"
