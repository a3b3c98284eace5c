-- An operator's edit of a queued (ready or scheduled) job: what the form showed, then a compare-and-set.

-- name: queued_as_seen
-- A job's editable fields as an edit form shows them (the payload by the digest of PostgreSQL's own text of
-- it, so the digest does not depend on how a page printed it), with what the edit keeps.
SELECT status::text AS status, queue, priority, run_at, attempts, payload,
       encode(sha256(convert_to(payload::text, 'UTF8')), 'hex') AS digest,
       lock_key, tenant, version, max_attempts
  FROM jobs
 WHERE id = %(id)s

-- name: lock_as_seen
-- The same, locked until the edit's transaction ends: a worker's claim skips it meanwhile (SKIP LOCKED).
SELECT status::text AS status, queue, priority, run_at, attempts, payload,
       encode(sha256(convert_to(payload::text, 'UTF8')), 'hex') AS digest,
       lock_key, tenant, version, max_attempts
  FROM jobs
 WHERE id = %(id)s
   FOR UPDATE

-- name: edit_queued
-- Write an operator's edit of a queued job (no run_at: now); guarded on the status it must still have.
UPDATE jobs
   SET queue = %(queue)s, payload = %(payload)s::jsonb, priority = %(priority)s,
       run_at = coalesce(%(run_at)s::timestamptz, now())
 WHERE id = %(id)s AND status = 'queued'
RETURNING id, queue
