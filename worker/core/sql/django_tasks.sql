-- Reads for the Django task backend (skiplock.django): a TaskResult is built from a job's row while it
-- exists, else from what the ack stored in job_results. Nothing here writes.

-- name: task_result
-- One job as a Django TaskResult needs it: the row's state, payload, times and errors, and the stored result.
SELECT j.status::text, j.queue, j.priority, j.payload, j.created_at, j.started_at, j.finished_at, j.attempts,
       j.worker_id, j.last_error, j.attempt_errors,
       r.state::text, r.result, r.error, r.finished_at
  FROM (SELECT %(id)s::bigint AS id) k
  LEFT JOIN jobs j ON j.id = k.id
  LEFT JOIN job_results r ON r.job_id = k.id

-- name: in_flight_by_unique_key
-- The job that holds a unique key now (queued or running): where a duplicate enqueue points its caller.
SELECT id FROM jobs WHERE unique_key = %(key)s AND status IN ('queued', 'running')
