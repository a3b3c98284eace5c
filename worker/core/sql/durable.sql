-- Durable jobs: steps, cursors, sleeps, waits and signals (docs/explanation/durable-jobs.md).
-- The side tables job_steps, job_cursors, job_waits and job_signals (migration 035); the moves of the
-- 'parked' state: running -> parked (skiplock_park), parked -> queued (the wake pass, a signal through
-- skiplock_signal, an operator, the sweeper's repairs).

-- name: load_state
-- Everything a run of a durable job has stored, read once, on its first durable call: its steps, its
-- cursors, and the database's clock (a sleep's stored time is compared with it, not with the worker's).
SELECT 'step' AS kind, name, result AS value, now() AS at FROM job_steps WHERE job_id = %(job)s
UNION ALL
SELECT 'cursor', name, value, now() FROM job_cursors WHERE job_id = %(job)s
UNION ALL
SELECT 'now', NULL, NULL, now()

-- name: save_step
-- A finished step's result, fenced on the run (this worker, this attempt, still running). No row back:
-- the run lost the job, or a step of that name was already stored (the first one stays).
INSERT INTO job_steps (job_id, name, result, attempt)
SELECT j.id, %(name)s, %(result)s::jsonb, j.attempts
  FROM jobs j
 WHERE j.id = %(job)s AND j.worker_id = %(worker_id)s AND j.attempts = %(attempt)s AND j.status = 'running'
ON CONFLICT (job_id, name) DO NOTHING
RETURNING job_id

-- name: save_cursors
-- The cursors saved in memory since the last write, for this worker's running jobs (fenced on the
-- worker and the run): the heartbeat's, the shutdown's and a finished run's flush.
INSERT INTO job_cursors (job_id, name, value, saved_at)
SELECT v.job_id, v.name, v.value::jsonb, now()
  FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(names)s::text[], %(values)s::text[])
       AS v(job_id, attempt, name, value)
  JOIN jobs j ON j.id = v.job_id AND j.worker_id = %(worker_id)s AND j.attempts = v.attempt
             AND j.status = 'running'
ON CONFLICT (job_id, name) DO UPDATE SET value = EXCLUDED.value, saved_at = EXCLUDED.saved_at

-- name: park
-- running -> parked for a sleep or a wait, in one transaction (migrations/functions/skiplock_park.sql
-- says what each outcome means).
SELECT outcome, value
  FROM skiplock_park(%(job)s, %(worker_id)s, %(attempt)s, %(step)s, %(key)s, %(until)s, %(seconds)s,
                     %(cursor_names)s::text[], %(cursor_values)s::text[])

-- name: signal
-- Send a signal (migrations/functions/skiplock_signal.sql): the first of a key is kept, every job parked
-- on it wakes; how many woke.
SELECT skiplock_signal(%(key)s, %(payload)s::jsonb)

-- name: wake_due
-- The wake pass: parked jobs whose time has come (a sleep's end, a wait's timeout) -> queued, through
-- jobs_parked_idx in run_at order (never a scan of jobs), then their wait rows deleted and a wait's
-- timeout recorded as its step. Jobs first, then wait rows: skiplock_signal locks them in that order.
-- Returns the queues woken, each once, for the NOTIFY.
WITH due AS (
    SELECT id FROM jobs
     WHERE status = 'parked' AND run_at <= now()
     ORDER BY run_at
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), woke AS (
    UPDATE jobs j SET status = 'queued', run_at = now()
      FROM due
     WHERE j.id = due.id AND j.status = 'parked'
    RETURNING j.id, j.queue, j.attempts
), gone AS (
    DELETE FROM job_waits w USING woke WHERE w.job_id = woke.id
    RETURNING w.job_id, w.key
), timed_out AS (
    INSERT INTO job_steps (job_id, name, result, attempt)
    SELECT gone.job_id, 'wait_for:' || gone.key, '{"timeout": true}', woke.attempts
      FROM gone JOIN woke ON woke.id = gone.job_id
     WHERE gone.key IS NOT NULL
    ON CONFLICT (job_id, name) DO NOTHING
)
SELECT queue, count(*) FROM woke GROUP BY queue

-- name: wake_now
-- Operator: these parked jobs -> queued now ("wake now"), their wait rows deleted. A sleeping job's
-- re-run parks again if its time has not come; a waiting one parks again on its key. Returns (id, queue).
WITH woke AS (
    UPDATE jobs SET status = 'queued', run_at = now()
     WHERE id = ANY(%(ids)s::bigint[]) AND status = 'parked'
    RETURNING id, queue
), gone AS (
    DELETE FROM job_waits w USING woke WHERE w.job_id = woke.id
)
SELECT id, queue FROM woke

-- name: notify_queues
-- Wake the workers of these queues (the listener claims for a queue it serves when its name arrives).
SELECT pg_notify('skiplock_jobs', q) FROM unnest(%(queues)s::text[]) AS q

-- name: wake_signalled
-- Sweeper repair: parked jobs whose key already has a signal (only a bug could leave one) -> queued,
-- with the payload recorded as their wait_for step. Returns (id, queue).
WITH stuck AS (
    SELECT w.job_id, w.key, s.payload FROM job_waits w JOIN job_signals s ON s.key = w.key
     LIMIT %(limit)s
), woke AS (
    UPDATE jobs j SET status = 'queued', run_at = now()
      FROM stuck
     WHERE j.id = stuck.job_id AND j.status = 'parked'
    RETURNING j.id, j.queue, j.attempts
), gone AS (
    DELETE FROM job_waits w USING woke WHERE w.job_id = woke.id
), recorded AS (
    INSERT INTO job_steps (job_id, name, result, attempt)
    SELECT stuck.job_id, 'wait_for:' || stuck.key, jsonb_build_object('payload', stuck.payload), woke.attempts
      FROM stuck JOIN woke ON woke.id = stuck.job_id
    ON CONFLICT (job_id, name) DO NOTHING
)
SELECT id, queue FROM woke

-- name: wake_unwaited
-- Sweeper repair: parked jobs with no wait row (nothing would tell what wakes them) -> queued: their
-- re-run parks again properly. Walks jobs_parked_idx. Returns (id, queue).
UPDATE jobs j SET status = 'queued', run_at = now()
 WHERE j.id IN (SELECT p.id FROM jobs p
                 WHERE p.status = 'parked'
                   AND NOT EXISTS (SELECT 1 FROM job_waits w WHERE w.job_id = p.id)
                 LIMIT %(limit)s
                   FOR UPDATE SKIP LOCKED)
   AND j.status = 'parked'
RETURNING j.id, j.queue

-- name: unwakeable
-- Doctor: parked jobs that no timer and no key can wake (no time, and no wait row with a key), oldest
-- first, at most %(limit)s: (id, queue, parked since).
SELECT j.id, j.queue, w.parked_at
  FROM jobs j LEFT JOIN job_waits w ON w.job_id = j.id
 WHERE j.status = 'parked' AND j.run_at >= '9999-12-31 00:00:00+00' AND w.key IS NULL
 ORDER BY j.id
 LIMIT %(limit)s

-- name: count_unwakeable
-- Doctor: how many parked jobs no timer and no key can wake.
SELECT count(*)
  FROM jobs j LEFT JOIN job_waits w ON w.job_id = j.id
 WHERE j.status = 'parked' AND j.run_at >= '9999-12-31 00:00:00+00' AND w.key IS NULL

-- name: parked_on
-- What one job is parked on: its wait row (sleep name or key, wake time or timeout, since when).
SELECT job_id, queue, sleep, key, wake_at, parked_at FROM job_waits WHERE job_id = %(job)s

-- name: steps_of
-- One job's stored steps, in the order they were done: name, when, by which attempt, the result's size.
SELECT name, done_at, attempt, octet_length(result::text) AS size FROM job_steps
 WHERE job_id = %(job)s ORDER BY done_at, name

-- name: cursors_of
-- One job's saved cursors: name, value, when saved.
SELECT name, value, saved_at FROM job_cursors WHERE job_id = %(job)s ORDER BY name

-- name: prune_steps
-- Pruner: the steps of up to %(limit)s jobs that are gone (succeeded and deleted, moved to history, or pruned).
DELETE FROM job_steps s
 WHERE s.job_id IN (SELECT DISTINCT st.job_id FROM job_steps st
                     WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = st.job_id)
                     LIMIT %(limit)s)

-- name: prune_cursors
-- Pruner: the cursors of up to %(limit)s jobs that are gone.
DELETE FROM job_cursors c
 WHERE c.job_id IN (SELECT DISTINCT cu.job_id FROM job_cursors cu
                     WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = cu.job_id)
                     LIMIT %(limit)s)

-- name: prune_waits
-- Pruner: the wait rows of up to %(limit)s jobs that are gone or no longer parked (cancelled).
DELETE FROM job_waits w
 WHERE w.job_id IN (SELECT wa.job_id FROM job_waits wa
                     WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = wa.job_id AND j.status = 'parked')
                     LIMIT %(limit)s)

-- name: prune_signals
-- Pruner: up to %(limit)s signals sent more than %(older_than)s seconds ago (SKIPLOCK_SIGNAL_RETENTION).
DELETE FROM job_signals
 WHERE key IN (SELECT key FROM job_signals
                WHERE sent_at < now() - make_interval(secs => %(older_than)s)
                ORDER BY sent_at
                LIMIT %(limit)s)

-- name: parked_counts
-- Parked jobs per queue (the metrics' parked state, the console's counts), from the narrow wait rows.
SELECT queue, count(*) FROM job_waits GROUP BY queue

-- name: fast_forward
-- Tests only (skiplock.testing.run_durable): the parked jobs of these queues whose sleep has not ended (and,
-- with %(waits)s, whose wait has a timeout) get their stored time moved to now, and run_at with it, so
-- that the wake pass wakes them at once and their re-run passes the sleep (or sees the timeout).
WITH parked AS (
    SELECT w.job_id, w.sleep, w.key FROM job_waits w
     WHERE w.queue = ANY(%(queues)s::text[])
       AND (w.sleep IS NOT NULL OR (%(waits)s AND w.wake_at < '9999-12-31 00:00:00+00'))
), moved AS (
    UPDATE job_steps s SET result = to_jsonb(now())
      FROM parked p
     WHERE s.job_id = p.job_id
       AND s.name = CASE WHEN p.sleep IS NOT NULL THEN 'sleep:' || p.sleep ELSE 'timeout:' || p.key END
)
UPDATE jobs j SET run_at = now()
  FROM parked p
 WHERE j.id = p.job_id AND j.status = 'parked'
RETURNING j.id
