-- The reaper's and the operators' transitions of chosen jobs (the console, the CLI, skiplock's API). Each
-- names the state it expects, so a job someone else has moved meanwhile is left alone, and each that ends
-- jobs dead or failed settles their dependents and batches in the same statement (skiplock_settle, called
-- only once anything was ever linked: the skiplock_linked flag). A retry re-opens what the failed job had
-- settled (skiplock_reopen). A purge leaves a tombstone in job_results, so wait() and a dependent
-- enqueued later still learn that the job ended dead or failed (a job gone without one is taken as
-- succeeded, history mode delete).

-- name: expired_leases
-- Running jobs whose lease expired (a crashed or frozen worker), oldest first, locked for the reaper's
-- transaction (SKIP LOCKED: another reaper takes the others): lease_lost then moves them.
SELECT id FROM jobs
 WHERE status = 'running' AND lease_until < now()
 ORDER BY lease_until
 LIMIT %(limit)s
   FOR UPDATE SKIP LOCKED

-- name: lease_lost
-- running -> queued, or dead when that run was the job's last attempt, per row: a lease that expired
-- (the reaper: %(actors)s NULL) or an operator's release (the actor named) that does not wait for the
-- lease. An expired lease is re-checked here, so a heartbeat that landed meanwhile wins. skiplock's own
-- annotation is the headline of this attempt, its group names the cause, and last_error keeps it above
-- the run's own error. Dead jobs settle their dependents and batches.
WITH lost AS (
    UPDATE jobs j
       SET status = CASE WHEN j.attempts >= j.max_attempts THEN 'dead'::job_status
                         ELSE 'queued'::job_status END,
           finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
           last_error = concat_ws(E'\n',
                                  CASE WHEN v.actor IS NULL
                                       THEN 'lease expired: worker ' || j.worker_id
                                            || ' stopped heartbeating during attempt ' || j.attempts
                                       ELSE 'released by ' || v.actor || ' from worker ' || j.worker_id
                                            || ' during attempt ' || j.attempts END,
                                  j.last_error),
           error_headline = CASE WHEN v.actor IS NULL
                                 THEN 'lease expired: worker ' || j.worker_id || ' stopped heartbeating'
                                 ELSE 'released by ' || v.actor || ' from worker ' || j.worker_id END,
           error_group = CASE WHEN v.actor IS NULL THEN 'lease expired: a worker stopped heartbeating'
                              ELSE 'released by an operator' END,
           worker_id = NULL,
           lease_until = NULL,
           run_at = now()
      FROM unnest(%(ids)s::bigint[], %(actors)s::text[]) AS v(id, actor)
     WHERE j.id = v.id AND j.status = 'running' AND (v.actor IS NOT NULL OR j.lease_until < now())
    RETURNING j.id, j.queue, j.status, j.batch_id, j.error_headline
), finals AS MATERIALIZED (
    SELECT id, status AS state, batch_id, error_headline AS head FROM lost WHERE status = 'dead'
), settled AS MATERIALIZED (
    SELECT CASE WHEN pg_sequence_last_value('skiplock_linked') IS NOT NULL
                THEN skiplock_settle(ARRAY(SELECT id FROM finals ORDER BY id),
                                     ARRAY(SELECT state::text FROM finals ORDER BY id),
                                     ARRAY(SELECT batch_id FROM finals ORDER BY id),
                                     ARRAY(SELECT head FROM finals ORDER BY id)) END AS n
)
SELECT id, queue, status FROM lost, settled

-- name: retry_finished
-- Retry dead or failed jobs: back to queued now with a fresh attempt budget (an operator's chosen jobs,
-- a batch of "retry all matching", a workflow's root causes, an edited payload's job).
WITH before AS (
    SELECT id, status AS old FROM jobs WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('dead', 'failed') FOR UPDATE
), retried AS (
    UPDATE jobs j
       SET status = 'queued', attempts = 0, run_at = now(), finished_at = NULL,
           worker_id = NULL, lease_until = NULL
      FROM before b
     WHERE j.id = b.id AND j.status IN ('dead', 'failed')
    RETURNING j.id, j.queue, b.old
), reopened AS MATERIALIZED (
    SELECT CASE WHEN pg_sequence_last_value('skiplock_linked') IS NOT NULL
                THEN skiplock_reopen(ARRAY(SELECT id FROM retried ORDER BY id),
                                     ARRAY(SELECT old::text FROM retried ORDER BY id)) END AS n
)
SELECT id, queue FROM retried, reopened

-- name: purge_finished
-- Purge dead or failed jobs for good, each leaving its tombstone (chosen ones, or a batch of "purge all
-- matching").
WITH purged AS (
    DELETE FROM jobs
     WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('dead', 'failed')
    RETURNING id, status, error_headline
), tombstones AS (
    INSERT INTO job_results (job_id, state, error)
    SELECT id, status, error_headline FROM purged
    ON CONFLICT (job_id) DO NOTHING
)
SELECT id FROM purged

-- name: cancel_queued
-- Cancel queued, waiting or parked jobs: finish them as failed so they are never claimed. Their dependents
-- that have not started are cancelled with them (skiplock_settle: a failed parent).
WITH cancelled AS (
    UPDATE jobs
       SET status = 'failed', finished_at = now(),
           last_error = concat_ws(E'\n', 'cancelled by ' || %(actor)s, last_error),
           error_headline = 'cancelled by ' || %(actor)s, error_group = 'cancelled by an operator'
     WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('queued', 'waiting', 'parked')
    RETURNING id, batch_id, error_headline
), finals AS MATERIALIZED (
    SELECT id, 'failed' AS state, batch_id, error_headline AS head FROM cancelled
), settled AS MATERIALIZED (
    SELECT CASE WHEN pg_sequence_last_value('skiplock_linked') IS NOT NULL
                THEN skiplock_settle(ARRAY(SELECT id FROM finals ORDER BY id),
                                     ARRAY(SELECT state::text FROM finals ORDER BY id),
                                     ARRAY(SELECT batch_id FROM finals ORDER BY id),
                                     ARRAY(SELECT head FROM finals ORDER BY id)) END AS n
)
SELECT id FROM cancelled, settled

-- name: run_now
-- Run scheduled (future) queued jobs now.
UPDATE jobs SET run_at = now()
 WHERE id = ANY(%(ids)s::bigint[]) AND status = 'queued' AND run_at > now()
RETURNING id, queue

-- name: request_cancel
-- A cancel request on running jobs (features/cancel.py): their handlers learn of it with the next heartbeat.
UPDATE jobs SET cancel_requested_at = now(), cancel_requested_by = %(actor)s
 WHERE id = ANY(%(ids)s::bigint[]) AND status = 'running'
RETURNING id

-- name: cancel_job_status
-- The status of a job whose cancel request found it not running (features/cancel.py says why).
SELECT status::text FROM jobs WHERE id = %(id)s

-- name: write_dead_payload
-- An operator's edit of a dead job's payload (features/payload_edit.py), just before the same transaction
-- retries it. Guarded like that retry: only a dead job's payload is ever written here.
UPDATE jobs SET payload = %(new)s::jsonb WHERE id = %(id)s AND status = 'dead'

-- name: notify_queues
-- Wake workers of the given queues (used after operator actions make work ready).
SELECT pg_notify('skiplock_jobs', q) FROM unnest(%(queues)s::text[]) AS q

-- name: count_finished_ids
-- How many of the given ids are dead or failed now: what retrying or purging them would change.
SELECT count(*) FROM jobs WHERE id = ANY(%(ids)s) AND status IN ('dead', 'failed')

-- name: job_detail
-- One job as `skiplock jobs show` prints it (reads only).
SELECT id, queue, status::text AS status, priority, attempts, max_attempts, created_at, run_at, started_at,
       finished_at, worker_id, unique_key, lock_key, tenant, version, error_group, last_error, payload
  FROM jobs
 WHERE id = %(id)s
