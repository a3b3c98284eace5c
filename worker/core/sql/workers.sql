-- The workers table: one row per live worker process, refreshed by its heartbeat (the console's workers page).

-- name: worker_upsert
-- Register or refresh a live worker row (its heartbeat).
INSERT INTO workers (id, host, pid, queues, concurrency, in_flight, task_versions)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s, %(concurrency)s, %(in_flight)s, %(task_versions)s::jsonb)
ON CONFLICT (id) DO UPDATE SET last_seen = now(), in_flight = EXCLUDED.in_flight
-- an operator's quiet/stop for this worker (worker/core/features/worker_control.py)
RETURNING command, command_by

-- name: worker_delete
-- Remove a worker row on clean exit.
DELETE FROM workers WHERE id = %(id)s

-- name: worker_prune_stale
-- Forget workers that stopped heartbeating long ago (their jobs are the reaper's business).
DELETE FROM workers WHERE last_seen < now() - make_interval(secs => %(older_than)s) RETURNING id
