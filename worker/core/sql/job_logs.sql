-- The job's own log lines, one row per attempt that logged anything (migration 041).

-- name: write_attempts
-- Each attempt's lines so far, rewritten whole (a run's heartbeat, then its ack, write the same row again).
INSERT INTO job_logs (job_id, attempt, worker_id, lines, line_count, dropped)
SELECT u.job_id, u.attempt, %(worker_id)s, u.lines, u.line_count, u.dropped
  FROM unnest(%(job_ids)s::bigint[], %(attempts)s::int[], %(lines)s::text[], %(line_counts)s::int[],
              %(dropped)s::int[]) AS u(job_id, attempt, lines, line_count, dropped)
ON CONFLICT (job_id, attempt) DO UPDATE
   SET worker_id = EXCLUDED.worker_id, lines = EXCLUDED.lines, line_count = EXCLUDED.line_count,
       dropped = EXCLUDED.dropped, updated_at = now()

-- name: of_job
-- The log lines of a job's latest %(limit)s attempts that logged anything, the latest first.
SELECT attempt, worker_id, lines, line_count, dropped, updated_at
  FROM job_logs
 WHERE job_id = %(job_id)s
 ORDER BY attempt DESC
 LIMIT %(limit)s

-- name: counts_of_job
-- How many lines each attempt of a job logged (kept and dropped), for its timeline.
SELECT attempt, line_count, dropped
  FROM job_logs
 WHERE job_id = %(job_id)s

-- name: jobs_logging
-- Up to %(limit)s jobs (newest first) whose log lines contain %(text)s, with the first matching attempt.
SELECT job_id, min(attempt) AS attempt
  FROM job_logs
 WHERE lines ILIKE '%%' || %(text)s || '%%'
 GROUP BY job_id
 ORDER BY job_id DESC
 LIMIT %(limit)s

-- name: prune
-- Up to %(limit)s attempts' lines older than %(retention)s seconds.
DELETE FROM job_logs
 WHERE ctid = ANY (ARRAY(SELECT ctid FROM job_logs
                          WHERE updated_at < now() - make_interval(secs => %(retention)s)
                          LIMIT %(limit)s))
