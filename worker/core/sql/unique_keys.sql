-- unique_keys (migration 037): enqueue(..., unique_key=k, unique_for=seconds). A key is held until its
-- expires_at, whatever becomes of its job; the first enqueue in that window owns it.

-- name: enqueue_unique_for
-- Take the key (new, or expired: taken again) with the id the job will have, and insert the job in the
-- same statement. A key held and unexpired gives no row to insert, so nothing is written. A racing
-- producer's INSERT waits on the key's row until the first commits, then finds it held. claimed is the
-- id when this call took the key; inserted is NULL when a job still in flight carries the same unique_key
-- (one enqueued without unique_for, or whose key expired while it waited), which the caller adopts.
WITH key AS (
    INSERT INTO unique_keys AS k (key, job_id, expires_at)
    VALUES (%(unique_key)s, nextval('jobs_id_seq'), now() + make_interval(secs => %(unique_for)s))
    ON CONFLICT (key) DO UPDATE
       SET job_id = EXCLUDED.job_id, created_at = now(), expires_at = EXCLUDED.expires_at
     WHERE k.expires_at <= now()
    RETURNING job_id
), job AS (
    INSERT INTO jobs (id, queue, payload, priority, run_at, max_attempts, lock_key, tenant, version, weight, task_options_unknown,
                      unique_key, trace_context)
    SELECT key.job_id, %(queue)s, %(payload)s::jsonb, %(priority)s, coalesce(%(run_at)s, now()),
           %(max_attempts)s, %(lock_key)s, %(tenant)s, %(version)s, %(weight)s, %(task_options_unknown)s::smallint, %(unique_key)s, %(trace_context)s::jsonb
      FROM key
    ON CONFLICT (unique_key) WHERE status IN ('queued', 'running') DO NOTHING
    RETURNING id
)
SELECT (SELECT job_id FROM key) AS claimed, (SELECT id FROM job) AS inserted

-- name: held_job
-- The job that holds an unexpired key: what a second enqueue within unique_for returns.
SELECT job_id FROM unique_keys WHERE key = %(unique_key)s

-- name: adopt_inflight
-- The key just taken points at the job already in flight with the same unique_key (the insert collapsed
-- onto it), so later enqueues within the window return that job.
UPDATE unique_keys SET job_id = j.id
  FROM jobs j
 WHERE unique_keys.key = %(unique_key)s
   AND j.unique_key = %(unique_key)s AND j.status IN ('queued', 'running')
RETURNING j.id

-- name: prune_expired
-- Expired keys, a batch at a time, oldest first, read through unique_keys_expires_at_idx (never the live
-- keys). An expired key that is still there is harmless: enqueue_unique_for takes it again.
DELETE FROM unique_keys
 WHERE key IN (SELECT key FROM unique_keys WHERE expires_at < now() ORDER BY expires_at LIMIT %(limit)s)

-- name: expire_now
-- The key this call took names a job that was never inserted (the in-flight job it collapsed onto
-- finished meanwhile): expire it so that the next enqueue_unique_for takes it again with a job.
UPDATE unique_keys SET expires_at = now() WHERE key = %(unique_key)s RETURNING key
