-- The console's and the CLI's "all matching" actions over finished jobs. Every statement here uses the
-- same filter, written out in each: finished jobs of one status, optionally narrowed by queue,
-- finish-time window, error group (the group a dead letter is counted in: skiplock/core/error_summary.py,
-- exception class + masked message, or the first line of last_error cut to 200 characters), and text in
-- unique_key/payload/last_error. `until` pins the set to what the operator confirmed: jobs that died
-- after the confirmation page was shown are left alone. tests/unit/test_sql_files.py holds the copies
-- of the filter to one text.

-- name: count_finished_matching
-- How many finished jobs match the filter, counting at most %(cap)s (the confirmation's number).
SELECT count(*) FROM (
    SELECT 1 FROM jobs
     WHERE status = %(status)s::job_status
       AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
       AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s::timestamptz)
       AND (%(until)s::timestamptz IS NULL OR finished_at <= %(until)s::timestamptz)
       AND (%(error)s::text IS NULL
            OR coalesce(error_group, left(split_part(coalesce(last_error, ''), E'\n', 1), 200)) = %(error)s::text)
       AND (%(text)s::text IS NULL OR unique_key ILIKE %(text)s::text OR payload::text ILIKE %(text)s::text
            OR last_error ILIKE %(text)s::text)
     LIMIT %(cap)s) AS m

-- name: finished_matching_batch
-- One bounded batch of "retry / purge all matching": the next %(limit)s matching ids after %(after)s,
-- locked for the caller's transaction (SKIP LOCKED: a row another operator is changing right now is
-- left to them), then retried by retry_finished or purged by purge_finished. Walking by id guarantees
-- progress and bounded statements.
SELECT id FROM jobs
 WHERE status = %(status)s::job_status
   AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
   AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s::timestamptz)
   AND (%(until)s::timestamptz IS NULL OR finished_at <= %(until)s::timestamptz)
   AND (%(error)s::text IS NULL
        OR coalesce(error_group, left(split_part(coalesce(last_error, ''), E'\n', 1), 200)) = %(error)s::text)
   AND (%(text)s::text IS NULL OR unique_key ILIKE %(text)s::text OR payload::text ILIKE %(text)s::text
        OR last_error ILIKE %(text)s::text)
   AND id > %(after)s
 ORDER BY id
 LIMIT %(limit)s
   FOR UPDATE SKIP LOCKED

-- name: list_finished_matching
-- The newest %(limit)s finished jobs the filter covers, for `skiplock jobs list` (reads only).
SELECT id, queue, status::text AS status, finished_at, attempts, max_attempts,
       coalesce(error_headline, coalesce(error_group, left(split_part(coalesce(last_error, ''), E'\n', 1), 200)))
           AS error
  FROM jobs
 WHERE status = %(status)s::job_status
   AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
   AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s::timestamptz)
   AND (%(until)s::timestamptz IS NULL OR finished_at <= %(until)s::timestamptz)
   AND (%(error)s::text IS NULL
        OR coalesce(error_group, left(split_part(coalesce(last_error, ''), E'\n', 1), 200)) = %(error)s::text)
   AND (%(text)s::text IS NULL OR unique_key ILIKE %(text)s::text OR payload::text ILIKE %(text)s::text
        OR last_error ILIKE %(text)s::text)
 ORDER BY finished_at DESC, id DESC
 LIMIT %(limit)s

-- name: list_finished_matching_page
-- The console's page of the finished jobs the filter covers, newest first, after the keyset cursor
-- (%(c_time)s, %(c_id)s): exactly what a bulk action covers. error_line is the first line of the error
-- (error_headline, or last_error's first line cut to 200 characters).
SELECT id, queue, status::text, priority, run_at, created_at, started_at, finished_at,
       lease_until, attempts, max_attempts, unique_key, worker_id, lock_key, tenant, version,
       coalesce(error_headline, left(split_part(coalesce(last_error, ''), E'\n', 1), 200)) AS error_line,
       left(payload::text, 200) AS payload_head, left(last_error, %(error_chars)s) AS error_text
  FROM jobs
 WHERE status = %(status)s::job_status
   AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
   AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s::timestamptz)
   AND (%(until)s::timestamptz IS NULL OR finished_at <= %(until)s::timestamptz)
   AND (%(error)s::text IS NULL
        OR coalesce(error_group, left(split_part(coalesce(last_error, ''), E'\n', 1), 200)) = %(error)s::text)
   AND (%(text)s::text IS NULL OR unique_key ILIKE %(text)s::text OR payload::text ILIKE %(text)s::text
        OR last_error ILIKE %(text)s::text)
   AND (%(c_id)s::bigint IS NULL OR (finished_at, id) < (%(c_time)s::timestamptz, %(c_id)s::bigint))
 ORDER BY finished_at DESC, id DESC
 LIMIT %(limit)s
