-- The console's search in jobs_history (SKIPLOCK_HISTORY_MODE=partitioned moves succeeded jobs there), read
-- beside its search of jobs (webapp/pages/search.py): the same filters, the same columns, each row marked
-- archived. jobs_history has no lock key, tenant, version, signal waits or log lines: a search for one of
-- those finds nothing here, and the page does not ask.

-- name: history_by_id
-- One archived job by id (jobs_history_id_idx), if the other filters match it too.
SELECT id, queue, status::text AS status, priority, run_at, created_at, started_at, finished_at,
       NULL::timestamptz AS lease_until, attempts, max_attempts, unique_key, worker_id, NULL::text AS lock_key,
       NULL::text AS tenant, 1 AS version, left(split_part(coalesce(last_error, ''), E'\n', 1), 200) AS error_line,
       left(payload::text, 200) AS payload_head, true AS archived
  FROM jobs_history
 WHERE id = %(id)s::bigint
   AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
   AND (%(state)s::job_status IS NULL OR status = %(state)s::job_status)
   AND (%(payload)s::jsonb IS NULL OR payload @> %(payload)s::jsonb)
   AND (%(unique_key)s::text IS NULL OR unique_key = %(unique_key)s::text)
   AND (%(error)s::text IS NULL OR last_error ILIKE %(error)s::text)
   AND (%(after)s::bigint IS NULL OR id < %(after)s::bigint)

-- name: history_recent
-- Archived jobs that match, among the newest %(window)s of jobs_history before the cursor (a backward walk
-- of each partition's id index, merged), newest first: a search's cost stays bounded however long the
-- history is kept.
SELECT id, queue, status::text AS status, priority, run_at, created_at, started_at, finished_at,
       NULL::timestamptz AS lease_until, attempts, max_attempts, unique_key, worker_id, NULL::text AS lock_key,
       NULL::text AS tenant, 1 AS version, left(split_part(coalesce(last_error, ''), E'\n', 1), 200) AS error_line,
       left(payload::text, 200) AS payload_head, true AS archived
  FROM (SELECT * FROM jobs_history
         WHERE (%(after)s::bigint IS NULL OR id < %(after)s::bigint)
         ORDER BY id DESC
         LIMIT %(window)s) h
 WHERE (%(queue)s::text IS NULL OR queue = %(queue)s::text)
   AND (%(state)s::job_status IS NULL OR status = %(state)s::job_status)
   AND (%(payload)s::jsonb IS NULL OR payload @> %(payload)s::jsonb)
   AND (%(unique_key)s::text IS NULL OR unique_key = %(unique_key)s::text)
   AND (%(error)s::text IS NULL OR last_error ILIKE %(error)s::text)
 ORDER BY id DESC
 LIMIT %(limit)s

-- name: history_job
-- One archived job, whole, for its page (a search result in history leads there).
SELECT id, queue, status::text AS status, priority, run_at, created_at, started_at, finished_at, attempts,
       max_attempts, unique_key, worker_id, last_error, jsonb_pretty(payload) AS payload
  FROM jobs_history WHERE id = %(id)s::bigint
 LIMIT 1
