-- Paused queues: a paused queue is left out of every worker's claim (jobs_claim.sql) until resumed.

-- name: pause_queue
-- Pause a queue for every worker; no row back when it was paused already.
INSERT INTO paused_queues (queue, paused_by) VALUES (%(queue)s, %(actor)s)
ON CONFLICT (queue) DO NOTHING RETURNING queue

-- name: resume_queue
-- Resume a paused queue for every worker; no row back when it was not paused.
DELETE FROM paused_queues WHERE queue = %(queue)s RETURNING queue
