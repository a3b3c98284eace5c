-- A running job's stack, on request (migration 042).

-- name: ask
-- An operator asks for a job's stack: a new request replaces an earlier one (and its captured stack).
INSERT INTO job_stacks (job_id, requested_by)
VALUES (%(job_id)s, %(who)s)
ON CONFLICT (job_id) DO UPDATE
   SET requested_at = now(), requested_by = EXCLUDED.requested_by, worker_id = NULL, attempt = NULL,
       captured_at = NULL, stack = NULL
RETURNING requested_at

-- name: asked_of
-- Those of a worker's running jobs whose stack is asked for and not captured yet.
SELECT job_id FROM job_stacks WHERE captured_at IS NULL AND job_id = ANY(%(job_ids)s::bigint[])

-- name: capture
-- The stack a worker took of a job it runs, answering the open request.
UPDATE job_stacks
   SET captured_at = now(), worker_id = %(worker_id)s, attempt = %(attempt)s, stack = %(stack)s
 WHERE job_id = %(job_id)s AND captured_at IS NULL

-- name: of_job
-- A job's latest request and, once taken, its stack; with the job's status now (NULL: no such job any more).
SELECT s.job_id, s.requested_at, s.requested_by, s.worker_id, s.attempt, s.captured_at, s.stack,
       (SELECT j.status::text FROM jobs j WHERE j.id = s.job_id) AS job_status
  FROM job_stacks s
 WHERE s.job_id = %(job_id)s

-- name: prune
-- Requests and stacks older than %(retention)s seconds.
DELETE FROM job_stacks WHERE requested_at < now() - make_interval(secs => %(retention)s)

-- name: job_state
-- Whether a job runs now, and which run it is (a stack is asked only of a running job).
SELECT status::text AS status, attempts, worker_id FROM jobs WHERE id = %(job_id)s
