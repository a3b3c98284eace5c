"""The console's read-only SQL, one named statement per view need. Nothing here changes a job.

Big-table rules: every statement walks a partial index (jobs_ready_idx for queued,
jobs_running_idx for running, jobs_finished_idx for dead/failed/succeeded), counts are capped
(LIMIT cap+1 inside the count), and lists use keyset pagination, never OFFSET.
"""

from __future__ import annotations

from typing import Any

from skiplock.core.error_summary import GROUP_SQL, HEADLINE_SQL
from skiplock.core.features.run_times import BOUNDS as _RUN_TIME_BOUNDS
from skiplock.core.sql import queries

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

# A queue's distinct priorities among its ready jobs, highest first from START_FILTER on, by a loose
# index scan of jobs_ready_idx (queue, priority DESC, ...): one index probe per priority, however many
# jobs. QUEUE_STATS and RETRYING_IN_QUEUE start from all of them, the ready and scheduled pages from
# their cursor's.
_PRIOS_DOWN = """WITH RECURSIVE prios AS (
    (SELECT priority FROM jobs WHERE queue = %(queue)s AND status = 'queued' START_FILTER
      ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM jobs j WHERE j.queue = %(queue)s AND j.status = 'queued'
              AND j.priority < p.priority ORDER BY j.priority DESC LIMIT 1)
      FROM prios p WHERE p.priority IS NOT NULL
)"""
_QUEUE_PRIORITIES = _PRIOS_DOWN.replace("START_FILTER", "")

# One queue's overview numbers. jobs_ready_idx is ordered (queue, priority DESC, run_at, id), so
# run_at is only a range inside one priority: first find the queue's few distinct priorities with a
# loose index scan, then per priority count ready (run_at <= now) and scheduled (run_at > now) as
# range scans, and take the first due run_at (the oldest ready). Counts stop at %(cap)s + 1 rows
# per priority, so a million-row queue costs a bounded index walk.
QUEUE_STATS = _QUEUE_PRIORITIES + """, oldest AS (
    SELECT min((SELECT j.run_at FROM jobs j WHERE j.queue = %(queue)s AND j.status = 'queued'
                   AND j.priority = p.priority AND j.run_at <= now() ORDER BY j.run_at LIMIT 1)) AS run_at
      FROM prios p WHERE p.priority IS NOT NULL
)
SELECT
    -- the outer LIMIT stops the per-priority range scans as soon as the cap is reached
    (SELECT count(*) FROM (SELECT 1 FROM prios p CROSS JOIN LATERAL (
        SELECT 1 FROM jobs j WHERE j.queue = %(queue)s AND j.status = 'queued' AND j.priority = p.priority
           AND j.run_at <= now() LIMIT %(cap)s + 1) r WHERE p.priority IS NOT NULL LIMIT %(cap)s + 1) s) AS ready,
    (SELECT count(*) FROM (SELECT 1 FROM prios p CROSS JOIN LATERAL (
        SELECT 1 FROM jobs j WHERE j.queue = %(queue)s AND j.status = 'queued' AND j.priority = p.priority
           AND j.run_at > now() LIMIT %(cap)s + 1) r WHERE p.priority IS NOT NULL LIMIT %(cap)s + 1) s) AS scheduled,
    (SELECT count(*) FROM jobs WHERE status = 'running' AND queue = %(queue)s) AS running,
    (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'dead' AND queue = %(queue)s
                            LIMIT %(cap)s + 1) s) AS dead,
    (SELECT extract(epoch FROM now() - run_at) FROM oldest) AS oldest_ready_s,
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

# Succeeded, retried, reaped and dead per queue per bucket since %(start)s (job_stats is summed over
# workers), buckets of %(bucket)s seconds aligned on %(start)s: the overview's charts for 1 h, 24 h or 7 d.
# A reaped run is one a worker lost (killed, out of memory): a failure, though no handler raised.
STATS_RANGE = """
SELECT queue, date_bin(make_interval(secs => %(bucket)s), minute, %(start)s) AS bucket,
       sum(completed)::bigint AS succeeded, sum(retried)::bigint AS retried, sum(reaped)::bigint AS reaped,
       sum(dead)::bigint AS dead
  FROM job_stats
 WHERE minute >= %(start)s
 GROUP BY 1, 2
"""

# STATS_RANGE for buckets of whole hours (the 7-day charts): the hours job_stats_hourly holds (migration
# 033, rolled up by the pruner up to job_stats_rollup.until) and job_stats' minutes from there on. Without
# a rollup row every minute comes from job_stats, as in STATS_RANGE: slower, the same numbers.
STATS_RANGE_HOURLY = """
SELECT queue, date_bin(make_interval(secs => %(bucket)s), t, %(start)s) AS bucket,
       sum(completed)::bigint AS succeeded, sum(retried)::bigint AS retried, sum(reaped)::bigint AS reaped,
       sum(dead)::bigint AS dead
  FROM (SELECT queue, hour AS t, completed, retried, reaped, dead FROM job_stats_hourly
         WHERE hour >= %(start)s AND hour < (SELECT until FROM job_stats_rollup)
        UNION ALL
        SELECT queue, minute, completed, retried, reaped, dead FROM job_stats
         WHERE minute >= greatest(%(start)s, (SELECT until FROM job_stats_rollup))) s
 GROUP BY 1, 2
"""

# Runs finished (every outcome) in the current and the previous minute, and how far into the
# current minute we are: the live jobs/s is the sliding last 60 s from these.
LIVE_RATE = """
SELECT coalesce(sum(completed + retried + failed + dead) FILTER (WHERE minute = date_trunc('minute', now())), 0),
       coalesce(sum(completed + retried + failed + dead)
                FILTER (WHERE minute = date_trunc('minute', now()) - interval '1 minute'), 0),
       extract(epoch FROM now() - date_trunc('minute', now()))::float8
  FROM job_stats WHERE minute >= date_trunc('minute', now()) - interval '1 minute'
"""

# Today's runs (UTC day): all ended runs, and those that failed (raised and retried or died, or were
# lost with their worker and reaped).
TODAY = """
SELECT coalesce(sum(completed + retried + failed + dead + reaped), 0)::bigint,
       coalesce(sum(retried + dead + reaped), 0)::bigint
  FROM job_stats WHERE minute >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
"""

# One queue's scheduled jobs waiting for a retry (attempts > 0), among the first %(scan)s of its scheduled
# rows read: a bounded read, so the summary says "N+" when it stopped early. Per queue and priority
# on jobs_ready_idx, straight to the scheduled end of each range: "status = 'queued' AND run_at > now()"
# over the whole table has no index and was a sequential scan of every ready job, most of the
# overview's time on a big queue (docs/benchmarks/console.md).
RETRYING_IN_QUEUE = _QUEUE_PRIORITIES + """
SELECT count(*) FILTER (WHERE attempts > 0), count(*)
  FROM (SELECT r.attempts FROM prios p CROSS JOIN LATERAL (
          SELECT j.attempts FROM jobs j WHERE j.queue = %(queue)s AND j.status = 'queued'
             AND j.priority = p.priority AND j.run_at > now() LIMIT %(scan)s) r
         WHERE p.priority IS NOT NULL LIMIT %(scan)s) s
"""

# Live and stale worker processes (live: heartbeat within %(live)s s), for the overview's summary.
WORKER_COUNTS = """
SELECT count(*) FILTER (WHERE last_seen > now() - make_interval(secs => %(live)s)),
       count(*) FILTER (WHERE last_seen <= now() - make_interval(secs => %(live)s))
  FROM workers
"""

# The database's clock, so every age on a page is measured from the same instant.
NOW = "SELECT now()"

# ---- queue page: one status, keyset pages -----------------------------------------------------

_JOB_COLUMNS = f"""id, queue, status::text, priority, run_at, created_at, started_at, finished_at,
       lease_until, attempts, max_attempts, unique_key, worker_id, lock_key, tenant, version,
       {HEADLINE_SQL} AS error_line, left(payload::text, 200) AS payload_head"""

# Filters shared by the list statements: one id, and text in unique_key/payload/last_error.
_ID_FILTER = "AND (%(id)s::bigint IS NULL OR id = %(id)s::bigint)"
_TEXT_FILTER = """AND (%(text)s::text IS NULL OR unique_key ILIKE %(text)s::text OR payload::text ILIKE %(text)s::text
       OR last_error ILIKE %(text)s::text)"""

# Per status tab: (WHERE, rows after the cursor c_*, rows up to the search-window end e_*, ORDER BY,
# the cursor's columns). Each ORDER BY is the order of a partial index, so pages are index walks.
_TABS = {
    # ready jobs in claim order (jobs_ready_idx)
    "ready": ("queue = %(queue)s AND status = 'queued' AND run_at <= now()",
              """(%(c_id)s::bigint IS NULL OR priority < %(c_prio)s
        OR (priority = %(c_prio)s AND (run_at, id) > (%(c_time)s::timestamptz, %(c_id)s::bigint)))""",
              """(%(e_id)s::bigint IS NULL OR priority > %(e_prio)s
        OR (priority = %(e_prio)s AND (run_at, id) <= (%(e_time)s::timestamptz, %(e_id)s::bigint)))""",
              "priority DESC, run_at, id", "priority, run_at, id"),
    # running jobs, longest-running first
    "running": ("queue = %(queue)s AND status = 'running'",
                "(%(c_id)s::bigint IS NULL OR (started_at, id) > (%(c_time)s::timestamptz, %(c_id)s::bigint))",
                "(%(e_id)s::bigint IS NULL OR (started_at, id) <= (%(e_time)s::timestamptz, %(e_id)s::bigint))",
                "started_at, id", "NULL::int, started_at, id"),
    # finished jobs of one status, newest first (jobs_finished_idx)
    "finished": ("status = %(status)s::job_status AND queue = %(queue)s",
                 "(%(c_id)s::bigint IS NULL OR (finished_at, id) < (%(c_time)s::timestamptz, %(c_id)s::bigint))",
                 "(%(e_id)s::bigint IS NULL OR (finished_at, id) >= (%(e_time)s::timestamptz, %(e_id)s::bigint))",
                 "finished_at DESC, id DESC", "NULL::int, finished_at, id"),
}
_TABS["scheduled"] = (_TABS["ready"][0].replace("run_at <= now()", "run_at > now()"), *_TABS["ready"][1:])

# One page of a tab: rows after the cursor (and, when searching, not past the window's end).
LIST = {tab: f"""
SELECT {_JOB_COLUMNS} FROM jobs
 WHERE {where} {_ID_FILTER} {_TEXT_FILTER}
   AND {after} AND {upto}
 ORDER BY {order}
 LIMIT %(limit)s
""" for tab, (where, after, upto, order, _) in _TABS.items()}

# Ready and scheduled pages walk jobs_ready_idx one priority at a time: (queue, priority) fixed, then
# a (run_at, id) row comparison the btree can seek to, so page 1,000 costs what page 1 costs. The
# priorities come from a loose index scan starting at the cursor's; the search window's end (e_*)
# prunes lower priorities before their walk starts.

_QUEUED_PAGE = _PRIOS_DOWN.replace("START_FILTER", "AND (%(c_id)s::bigint IS NULL OR priority <= %(c_prio)s)") + f"""
SELECT r.* FROM prios p CROSS JOIN LATERAL (
    SELECT {_JOB_COLUMNS} FROM jobs
     WHERE queue = %(queue)s AND status = 'queued' AND priority = p.priority AND RUN_AT_TEST
       {_ID_FILTER} {_TEXT_FILTER}
       AND (run_at, id) > (CASE WHEN p.priority = %(c_prio)s THEN %(c_time)s::timestamptz
                                ELSE FLOOR END,
                           CASE WHEN p.priority = %(c_prio)s THEN %(c_id)s::bigint ELSE 0 END)
       AND (run_at, id) <= (CASE WHEN p.priority = %(e_prio)s THEN %(e_time)s::timestamptz
                                 ELSE CEILING END,
                            CASE WHEN p.priority = %(e_prio)s THEN %(e_id)s::bigint ELSE {2**63 - 1} END)
     ORDER BY run_at, id
     LIMIT %(limit)s
) r
 WHERE p.priority IS NOT NULL AND (%(e_id)s::bigint IS NULL OR p.priority >= %(e_prio)s)
 ORDER BY r.priority DESC, r.run_at, r.id
 LIMIT %(limit)s
"""
# The btree takes one start and one end key per column: folding "run_at <= now()" (ready) or
# "run_at > now()" (scheduled) into the row bounds keeps a priority's walk inside its own range.
LIST["ready"] = (_QUEUED_PAGE.replace("RUN_AT_TEST", "run_at <= now()")
                 .replace("FLOOR", "'-infinity'::timestamptz").replace("CEILING", "now()"))
LIST["scheduled"] = (_QUEUED_PAGE.replace("RUN_AT_TEST", "run_at > now()")
                     .replace("FLOOR", "now()").replace("CEILING", "'infinity'::timestamptz"))

# A text search reads at most %(scan)s rows from the cursor on (ILIKE on payload cannot use an
# index, and a rare word would otherwise scan a million rows): this is the cursor of the last row
# of that window, or no row when fewer remain.
WINDOW_END = {tab: f"""
SELECT {cursor} FROM jobs
 WHERE {where} {_ID_FILTER} AND {after}
 ORDER BY {order}
 OFFSET %(scan)s - 1 LIMIT 1
""" for tab, (where, after, _, order, cursor) in _TABS.items()}

# ---- long-runners -----------------------------------------------------------------------------

# Running jobs by runtime (the seed's long-runners, including expired leases the reaper is about to take).
# A job whose worker stopped heartbeating (row gone or last_seen older than %(stale_after)s s) is
# orphaned: nothing extends its lease, and the reaper takes it back once lease_until has passed.
LONG_RUNNERS = """
SELECT j.id, j.queue, extract(epoch FROM now() - j.started_at) AS runtime_s, j.attempts, j.max_attempts,
       j.worker_id, extract(epoch FROM j.lease_until - now()) AS lease_left_s, j.lease_until,
       left(j.payload::text, 120) AS payload_head, j.lock_key, j.tenant, j.version,
       j.cancel_requested_at, j.cancel_requested_by, j.progress, j.progress_message,  -- progress: migration 026
       (w.id IS NULL OR w.last_seen < now() - make_interval(secs => %(stale_after)s)) AS orphaned,
       w.last_seen AS worker_last_seen
  FROM jobs j LEFT JOIN workers w ON w.id = j.worker_id
 WHERE j.status = 'running' AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
   AND (%(worker)s::text IS NULL OR j.worker_id = %(worker)s::text)
 ORDER BY j.started_at, j.id
 LIMIT %(limit)s
"""

# The chosen jobs that are running now, for the confirmation of a release or a cancel.
RUNNING_CHOSEN = """
SELECT id, queue, worker_id, attempts >= max_attempts AS last_attempt,
       extract(epoch FROM now() - started_at) AS runtime_s, cancel_requested_at IS NOT NULL AS cancel_pending
  FROM jobs WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running'
 ORDER BY id
"""

# ---- run times (migration 028) -------------------------------------------------------------------

# Per queue over the last %(seconds)s: the run-time histogram summed bucket by bucket over every
# worker's minutes (one sum per bucket in a single pass: an unnest of every row's array costs many times
# more over a day of several workers' minutes), the number of runs, their total and the longest
# (worker/core/features/run_times.py).
_BUCKET_SUMS = ", ".join(f"sum(counts[{i}])::bigint" for i in range(1, len(_RUN_TIME_BOUNDS) + 2))
RUN_TIMES = f"""
SELECT queue, ARRAY[{_BUCKET_SUMS}] AS counts, sum(total)::bigint AS runs, sum(sum_s) AS sum_s, max(max_s) AS max_s
  FROM job_runtimes
 WHERE minute >= now() - make_interval(secs => %(seconds)s)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
 GROUP BY queue
 ORDER BY queue
"""

# ---- "What changed?" on the overview (webapp/pages/changed.py) --------------------------------------------

# Per queue: runs and failures (retried, dead or reaped: a crash-looping worker's runs fail too) in the
# last hour and in the 24 hours before it, and the first minute of the last hour with a failure.
CHANGED_RATES = """
SELECT queue,
       coalesce(sum(completed + retried + failed + dead + reaped) FILTER (WHERE minute >= now() - interval '1 hour'),
                0)::bigint,
       coalesce(sum(retried + dead + reaped) FILTER (WHERE minute >= now() - interval '1 hour'), 0)::bigint,
       coalesce(sum(completed + retried + failed + dead + reaped) FILTER (WHERE minute < now() - interval '1 hour'),
                0)::bigint,
       coalesce(sum(retried + dead + reaped) FILTER (WHERE minute < now() - interval '1 hour'), 0)::bigint,
       min(minute) FILTER (WHERE minute >= now() - interval '1 hour' AND retried + dead + reaped > 0)
  FROM job_stats
 WHERE minute >= now() - interval '25 hours'
 GROUP BY queue
"""
# Error groups of the last hour's dead jobs (the newest %(scan)s) that no dead job of the 24 hours before
# had: new bugs. All of them, largest first: the page names the first few and counts them all. Each
# "before" probe is one walk of jobs_dead_group_idx.
CHANGED_NEW_GROUPS = """
SELECT r.queue, r.error_group, min(r.finished_at) AS first_at, count(*) AS n
  FROM (SELECT queue, error_group, finished_at FROM jobs
         WHERE status = 'dead' AND finished_at >= now() - interval '1 hour'
         ORDER BY finished_at DESC LIMIT %(scan)s) r
 WHERE r.error_group IS NOT NULL AND NOT EXISTS (
       SELECT 1 FROM jobs o WHERE o.status = 'dead' AND o.queue = r.queue AND o.error_group = r.error_group
          AND o.finished_at >= now() - interval '25 hours' AND o.finished_at < now() - interval '1 hour')
 GROUP BY 1, 2
 ORDER BY n DESC
"""

# ---- recurring -------------------------------------------------------------------------------

RECENT_RUNS_PER_SCHEDULE = 5
# Each schedule's last slots with the outcome of their job (recurring_slots' primary key walks each
# schedule's slots newest first; jobs by primary key). No job row: it succeeded and was not kept
# (history mode delete), or was purged.
RECURRING_RUNS = """
SELECT s.name, r.fire_at, r.job_id, r.manual, j.status::text AS status, j.error_headline,
       extract(epoch FROM coalesce(j.finished_at, CASE WHEN j.status = 'running' THEN now() END) - j.started_at)
           AS duration_s
  FROM recurring_schedules s
 CROSS JOIN LATERAL (SELECT fire_at, job_id, manual FROM recurring_slots
                      WHERE name = s.name ORDER BY fire_at DESC LIMIT %(per)s) r
  LEFT JOIN jobs j ON j.id = r.job_id
 ORDER BY s.name, r.fire_at DESC
"""

# ---- dead letters -----------------------------------------------------------------------------

# Dead (or failed) jobs grouped by queue and error group (skiplock/core/error_summary.py) over the
# window, biggest first. Only the newest %(scan)s jobs of the window are read (newest-first on jobs_dead_recent_idx
# or jobs_finished_idx), so a million dead rows cost what %(scan)s cost; `scanned` tells the page
# whether the groups cover the whole window.
DEAD_GROUPS = f"""
WITH recent AS (
    SELECT queue, {GROUP_SQL} AS error, {HEADLINE_SQL} AS headline, finished_at
      FROM jobs
     WHERE status = %(status)s::job_status
       AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s::timestamptz)
       AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
     ORDER BY finished_at DESC
     LIMIT %(scan)s
)
SELECT queue, error, min(headline) AS example, count(*) AS n, max(finished_at) AS last_at,
       -- first seen (within what was read) and the trend: the last hour against the hour before
       min(finished_at) AS first_at,
       count(*) FILTER (WHERE finished_at >= now() - interval '1 hour') AS last_hour,
       count(*) FILTER (WHERE finished_at >= now() - interval '2 hours'
                          AND finished_at < now() - interval '1 hour') AS hour_before,
       (SELECT count(*) FROM recent) AS scanned
  FROM recent
 GROUP BY 1, 2
 ORDER BY n DESC, queue, error
 LIMIT %(limit)s
"""

# ---- one job, workers ---------------------------------------------------------------------------

JOB = """
SELECT id, queue, status::text, priority, run_at, created_at, started_at, finished_at, lease_until,
       attempts, max_attempts, unique_key, worker_id, last_error, jsonb_pretty(payload) AS payload,
       run_at > now() AS scheduled, snooze_count, attempt_errors,  -- both: migration 012
       workflow_id, batch_id, waiting_on, progress, progress_message, progress_at,  -- migration 026
       lock_key, tenant, version, cancel_requested_at, cancel_requested_by, now() AS now
  FROM jobs WHERE id = %(id)s
"""

# Live and recently seen workers; `stale` when the heartbeat is older than %(stale_after)s seconds.
# Every worker. A live one's in-flight count is what it last reported; a stale one (dead, most likely)
# reports nothing any more, so its count is what the jobs table says it holds now (none once the
# reaper took them back): one range of jobs_running_idx, as small as the running jobs.
WORKERS = """
SELECT id, host, pid, queues, concurrency,
       CASE WHEN last_seen < now() - make_interval(secs => %(stale_after)s)
            THEN (SELECT count(*)::int FROM jobs j WHERE j.status = 'running' AND j.worker_id = workers.id)
            ELSE in_flight END AS in_flight,
       started_at, last_seen, command, command_by, command_at,
       extract(epoch FROM now() - last_seen) AS seen_ago_s,
       last_seen < now() - make_interval(secs => %(stale_after)s) AS stale
  FROM workers
 ORDER BY stale, host, pid
 LIMIT 500
"""

# Dead (or failed) jobs matching the bulk-action filter, newest first, after the cursor. The same
# WHERE as the core's "all matching" actions, so the list shows exactly what a bulk action covers.
FINISHED_MATCH_LIST = queries("jobs_matching").list_finished_matching_page

# Whether workers skip this queue.
IS_PAUSED = "SELECT EXISTS (SELECT 1 FROM paused_queues WHERE queue = %(queue)s)"

# Is `queue` a queue anyone knows: it has jobs (each probe rides an index: ready, then finished by
# status), a live worker row lists it, a recurring schedule feeds it, or it is paused already.
# Pausing a queue nobody knows (a typo) would create a phantom paused queue.
QUEUE_KNOWN = """
SELECT EXISTS (SELECT 1 FROM jobs WHERE status = 'queued' AND queue = %(queue)s)
    OR EXISTS (SELECT 1 FROM jobs WHERE status = 'dead' AND queue = %(queue)s)
    OR EXISTS (SELECT 1 FROM jobs WHERE status = 'failed' AND queue = %(queue)s)
    OR EXISTS (SELECT 1 FROM jobs WHERE status = 'succeeded' AND queue = %(queue)s)
    OR EXISTS (SELECT 1 FROM workers WHERE %(queue)s = ANY(queues))
    OR EXISTS (SELECT 1 FROM recurring_schedules WHERE queue = %(queue)s)
    OR EXISTS (SELECT 1 FROM paused_queues WHERE queue = %(queue)s)
"""

# ---- queue page: the other orders and directions ------------------------------------------------
# "previous page" runs the page backwards from the first row shown (the caller reverses the rows),
# and ready/scheduled can be sorted by run_at instead of claim order. Neither takes the text-search
# window: a text search pages forwards in claim order only.

_RUN_AT_RANGE = {"ready": ("run_at <= now()", "'-infinity'::timestamptz", "now()"),
                 "scheduled": ("run_at > now()", "now()", "'infinity'::timestamptz")}

# Claim order, backwards: priorities from the cursor's upwards, each walked down from the cursor.
_QUEUED_PAGE_BACK = f"""
WITH RECURSIVE prios AS (
    (SELECT priority FROM jobs WHERE queue = %(queue)s AND status = 'queued' AND priority >= %(c_prio)s
      ORDER BY priority LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM jobs j WHERE j.queue = %(queue)s AND j.status = 'queued'
              AND j.priority > p.priority ORDER BY j.priority LIMIT 1)
      FROM prios p WHERE p.priority IS NOT NULL
)
SELECT r.* FROM prios p CROSS JOIN LATERAL (
    SELECT {_JOB_COLUMNS} FROM jobs
     WHERE queue = %(queue)s AND status = 'queued' AND priority = p.priority AND RUN_AT_TEST {_ID_FILTER}
       AND (run_at, id) < (CASE WHEN p.priority = %(c_prio)s THEN %(c_time)s::timestamptz ELSE CEILING END,
                           CASE WHEN p.priority = %(c_prio)s THEN %(c_id)s::bigint ELSE {2**63 - 1} END)
     ORDER BY run_at DESC, id DESC
     LIMIT %(limit)s
) r
 WHERE p.priority IS NOT NULL
 ORDER BY r.priority, r.run_at DESC, r.id DESC
 LIMIT %(limit)s
"""

# By run_at across priorities: each priority's range of jobs_ready_idx is already in (run_at, id)
# order, so the page merges one bounded walk per priority (forwards or backwards from the cursor).
_QUEUED_BY_RUN_AT = _PRIOS_DOWN.replace("START_FILTER", "") + f"""
SELECT r.* FROM prios p CROSS JOIN LATERAL (
    SELECT {_JOB_COLUMNS} FROM jobs
     WHERE queue = %(queue)s AND status = 'queued' AND priority = p.priority AND RUN_AT_TEST {_ID_FILTER}
       AND (%(c_id)s::bigint IS NULL OR (run_at, id) CMP (%(c_time)s::timestamptz, %(c_id)s::bigint))
     ORDER BY run_at DIR, id DIR
     LIMIT %(limit)s
) r
 WHERE p.priority IS NOT NULL
 ORDER BY r.run_at DIR, r.id DIR
 LIMIT %(limit)s
"""


def _fill(sql: str, tab: str) -> str:
    test, floor, ceiling = _RUN_AT_RANGE[tab]
    return sql.replace("RUN_AT_TEST", test).replace("FLOOR", floor).replace("CEILING", ceiling)


# (tab, sort, backwards) -> statement; claim order forwards is LIST[tab] above.
PAGE: dict[tuple[str, str, bool], str] = {}
for _tab in ("ready", "scheduled"):
    PAGE[(_tab, "priority", True)] = _fill(_QUEUED_PAGE_BACK, _tab)
    PAGE[(_tab, "run_at", False)] = _fill(_QUEUED_BY_RUN_AT.replace("CMP", ">").replace("DIR", "ASC"), _tab)
    PAGE[(_tab, "run_at", True)] = _fill(_QUEUED_BY_RUN_AT.replace("CMP", "<").replace("DIR", "DESC"), _tab)
PAGE[("running", "priority", True)] = f"""
SELECT {_JOB_COLUMNS} FROM jobs
 WHERE queue = %(queue)s AND status = 'running' {_ID_FILTER}
   AND (started_at, id) < (%(c_time)s::timestamptz, %(c_id)s::bigint)
 ORDER BY started_at DESC, id DESC
 LIMIT %(limit)s
"""
PAGE[("finished", "priority", True)] = f"""
SELECT {_JOB_COLUMNS} FROM jobs
 WHERE status = %(status)s::job_status AND queue = %(queue)s {_ID_FILTER}
   AND (finished_at, id) > (%(c_time)s::timestamptz, %(c_id)s::bigint)
 ORDER BY finished_at, id
 LIMIT %(limit)s
"""

# Every status tab's count for one queue, each stopped at %(cap)s + 1 (ready/scheduled/running/dead
# come from QUEUE_STATS).
FINISHED_COUNTS = """
SELECT (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'failed' AND queue = %(queue)s
                               LIMIT %(cap)s + 1) s) AS failed,
       (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'succeeded' AND queue = %(queue)s
                               LIMIT %(cap)s + 1) s) AS succeeded
"""

# ---- flow control on the queue page (templates/queues/_flow.html) ------------------------------

FLOW_CAP = 10_000  # tenant backlogs and the version mix count at most this many queued jobs each
FLOW_TENANTS = 20  # tenants listed on the queue page, in name order

# The queue's global limits (worker/core/features/limits.py) and how many of its jobs run now.
FLOW_LIMITS = """
SELECT l.concurrency, l.rate, l.burst, l.updated_by,
       (SELECT count(*) FROM jobs r WHERE r.status = 'running' AND r.queue = l.queue) AS running
  FROM queue_limits l
 WHERE l.queue = %(queue)s AND (l.concurrency IS NOT NULL OR l.rate IS NOT NULL)
"""
# Backlog per tenant: a loose index scan of jobs_tenant_ready_idx hops from tenant to tenant,
# then each tenant's queued jobs are counted up to the cap (an index-only walk each).
FLOW_TENANT_BACKLOG = """
WITH RECURSIVE t(tenant, n) AS (
    SELECT min(tenant), 1 FROM jobs WHERE queue = %(queue)s AND status = 'queued' AND tenant IS NOT NULL
    UNION ALL
    SELECT (SELECT min(j.tenant) FROM jobs j
             WHERE j.queue = %(queue)s AND j.status = 'queued' AND j.tenant IS NOT NULL AND j.tenant > t.tenant),
           t.n + 1
      FROM t WHERE t.tenant IS NOT NULL AND t.n < %(tenants)s
)
SELECT t.tenant, (SELECT count(*) FROM (SELECT 1 FROM jobs j
                                         WHERE j.queue = %(queue)s AND j.status = 'queued' AND j.tenant = t.tenant
                                         LIMIT %(cap)s) c) AS backlog
  FROM t WHERE t.tenant IS NOT NULL ORDER BY t.tenant
"""
# The payload versions among the queue's first %(cap)s queued jobs (in claim order).
FLOW_VERSIONS = """
SELECT version, count(*) FROM (SELECT version FROM jobs WHERE queue = %(queue)s AND status = 'queued'
                                ORDER BY priority DESC, run_at, id LIMIT %(cap)s) s
 GROUP BY version ORDER BY version
"""
# The newest version the live workers of the queue run (workers.task_versions).
FLOW_WORKER_VERSION = """
SELECT max((w.task_versions ->> %(queue)s)::int) FROM workers w
 WHERE w.last_seen > now() - interval '30 seconds' AND w.task_versions ? %(queue)s
"""


def queue_flow(conn: Any, queue: str) -> dict[str, Any]:
    """What templates/queues/_flow.html shows for one queue: limits (global and per tenant, with the tenants
    holding some of theirs now), tenant backlogs, payload versions."""
    params = {"queue": queue, "cap": FLOW_CAP, "tenants": FLOW_TENANTS}
    limit = conn.execute(FLOW_LIMITS, params).fetchone()
    from skiplock.core.features import limits  # the per-tenant limits and who is at them: the core's reads

    per_tenant = next((r for r in limits.list_limits(conn) if r.queue == queue and r.tenant_limits), None)
    return {
        "per_tenant": per_tenant,
        "tenants_at": limits.tenants_at_limit(conn, queue, limit=FLOW_TENANTS) if per_tenant else [],
        "limit": None if limit is None else {"concurrency": limit[0], "rate": limit[1], "burst": limit[2],
                                             "updated_by": limit[3], "running": limit[4]},
        "tenants": [{"tenant": t, "backlog": n} for t, n in conn.execute(FLOW_TENANT_BACKLOG, params)],
        "versions": [{"version": v, "count": n} for v, n in conn.execute(FLOW_VERSIONS, params)],
        "worker_version": (conn.execute(FLOW_WORKER_VERSION, params).fetchone() or [None])[0],
        "cap": FLOW_CAP, "tenant_cap": FLOW_TENANTS,
    }
