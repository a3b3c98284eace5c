-- The ack batch: one statement per flush of a worker's finished runs. Every branch is fenced on
-- worker_id, status AND attempt (the `f` lookup of jobs_running.sql): a result is written only while
-- the run that produced it still owns the job. Without the attempt, a worker that re-claimed its own
-- reaped job could have an older run's late result written over the newer run.
-- Three variants, written out in full, differ only in what a success does (the `ok` CTE: delete / keep
-- as succeeded / move to jobs_history); failures (`errored`: requeued with their backoff, or finished
-- as dead/failed), the per-minute stats, the stored results, the settle of dependents and batches
-- (skiplock_settle, called only once anything was ever linked: the skiplock_linked flag) and the
-- returned ids are the same text in all three.

-- name: ack_batch
-- Ack a batch, successes deleted (the default: no history, least write amplification).
WITH ok AS (
    DELETE FROM jobs j
     USING unnest(%(ok_ids)s::bigint[], %(ok_attempts)s::int[]) AS v(id, attempt)
           CROSS JOIN LATERAL (SELECT x.ctid FROM jobs x
                                WHERE x.id = v.id AND x.attempts = v.attempt AND x.worker_id = %(worker_id)s AND x.status::text = 'running'
                               OFFSET 0) f
     WHERE j.ctid = f.ctid
    RETURNING j.id, j.queue, j.lock_key, j.batch_id
), errored AS (
    UPDATE jobs j
       SET status = v.status::job_status,
           run_at = CASE WHEN v.status = 'queued' THEN now() + make_interval(secs => v.delay)
                         ELSE j.run_at END,
           finished_at = CASE WHEN v.status = 'queued' THEN NULL ELSE now() END,
           last_error = v.error,
           error_headline = v.headline,
           error_group = v.grp,
           worker_id = NULL,
           lease_until = NULL,
           progress = NULL  -- a new attempt reports its own
      FROM unnest(%(err_ids)s::bigint[], %(err_attempts)s::int[], %(err_status)s::text[],
                  %(err_delay)s::float8[], %(err_text)s::text[], %(err_headline)s::text[], %(err_group)s::text[])
           AS v(id, attempt, status, delay, error, headline, grp)
           CROSS JOIN LATERAL (SELECT x.ctid FROM jobs x
                                WHERE x.id = v.id AND x.attempts = v.attempt AND x.worker_id = %(worker_id)s AND x.status::text = 'running'
                               OFFSET 0) f
     WHERE j.ctid = f.ctid
    RETURNING j.id, j.queue, v.status, j.lock_key, j.batch_id, v.headline
), stats AS (
    INSERT INTO job_stats (minute, queue, worker_id, completed, retried, failed, dead)
    SELECT date_trunc('minute', now()), s.queue, %(worker_id)s,
           count(*) FILTER (WHERE s.outcome = 'ok'),
           count(*) FILTER (WHERE s.outcome = 'queued'),
           count(*) FILTER (WHERE s.outcome = 'failed'),
           count(*) FILTER (WHERE s.outcome = 'dead')
      FROM (SELECT queue, 'ok' AS outcome FROM ok
            UNION ALL SELECT queue, status FROM errored) s
     GROUP BY s.queue
    ON CONFLICT (minute, queue, worker_id) DO UPDATE
       SET completed = job_stats.completed + EXCLUDED.completed,
           retried = job_stats.retried + EXCLUDED.retried,
           failed = job_stats.failed + EXCLUDED.failed,
           dead = job_stats.dead + EXCLUDED.dead
), results AS (
    -- handlers' return values, stored with the success they belong to (fenced: only rows in `ok`)
    -- (or, for a value too large to keep, why it was not stored: skiplock.result() says so)
    INSERT INTO job_results (job_id, state, result, error)
    SELECT r.id, 'succeeded', r.value::jsonb, r.error
      FROM unnest(%(res_ids)s::bigint[], %(res_values)s::text[], %(res_errors)s::text[]) AS r(id, value, error)
     WHERE r.id IN (SELECT id FROM ok)
    ON CONFLICT (job_id) DO UPDATE SET state = EXCLUDED.state, result = EXCLUDED.result, error = EXCLUDED.error,
                                      finished_at = now()
), finals AS MATERIALIZED (
    SELECT id, 'succeeded' AS state, batch_id, NULL::text AS head FROM ok
    UNION ALL
    SELECT id, status, batch_id, headline FROM errored WHERE status IN ('dead', 'failed')
), settled AS MATERIALIZED (
    SELECT CASE WHEN pg_sequence_last_value('skiplock_linked') IS NOT NULL
                THEN skiplock_settle(ARRAY(SELECT id FROM finals ORDER BY id),
                                     ARRAY(SELECT state::text FROM finals ORDER BY id),
                                     ARRAY(SELECT batch_id FROM finals ORDER BY id),
                                     ARRAY(SELECT head FROM finals ORDER BY id)) END AS n
)
-- each written job's lock key: its end may let the key's next job be claimed (core.ack_batch_with_keys)
SELECT id, lock_key FROM ok, settled UNION ALL SELECT id, lock_key FROM errored, settled

-- name: ack_batch_keep
-- Ack a batch, successes kept as 'succeeded' rows (SKIPLOCK_HISTORY_MODE=keep); the pruner removes them later.
WITH ok AS (
    UPDATE jobs j
       SET status = 'succeeded', finished_at = now(), lease_until = NULL
      FROM unnest(%(ok_ids)s::bigint[], %(ok_attempts)s::int[]) AS v(id, attempt)
           CROSS JOIN LATERAL (SELECT x.ctid FROM jobs x
                                WHERE x.id = v.id AND x.attempts = v.attempt AND x.worker_id = %(worker_id)s AND x.status::text = 'running'
                               OFFSET 0) f
     WHERE j.ctid = f.ctid
    RETURNING j.id, j.queue, j.lock_key, j.batch_id
), errored AS (
    UPDATE jobs j
       SET status = v.status::job_status,
           run_at = CASE WHEN v.status = 'queued' THEN now() + make_interval(secs => v.delay)
                         ELSE j.run_at END,
           finished_at = CASE WHEN v.status = 'queued' THEN NULL ELSE now() END,
           last_error = v.error,
           error_headline = v.headline,
           error_group = v.grp,
           worker_id = NULL,
           lease_until = NULL,
           progress = NULL  -- a new attempt reports its own
      FROM unnest(%(err_ids)s::bigint[], %(err_attempts)s::int[], %(err_status)s::text[],
                  %(err_delay)s::float8[], %(err_text)s::text[], %(err_headline)s::text[], %(err_group)s::text[])
           AS v(id, attempt, status, delay, error, headline, grp)
           CROSS JOIN LATERAL (SELECT x.ctid FROM jobs x
                                WHERE x.id = v.id AND x.attempts = v.attempt AND x.worker_id = %(worker_id)s AND x.status::text = 'running'
                               OFFSET 0) f
     WHERE j.ctid = f.ctid
    RETURNING j.id, j.queue, v.status, j.lock_key, j.batch_id, v.headline
), stats AS (
    INSERT INTO job_stats (minute, queue, worker_id, completed, retried, failed, dead)
    SELECT date_trunc('minute', now()), s.queue, %(worker_id)s,
           count(*) FILTER (WHERE s.outcome = 'ok'),
           count(*) FILTER (WHERE s.outcome = 'queued'),
           count(*) FILTER (WHERE s.outcome = 'failed'),
           count(*) FILTER (WHERE s.outcome = 'dead')
      FROM (SELECT queue, 'ok' AS outcome FROM ok
            UNION ALL SELECT queue, status FROM errored) s
     GROUP BY s.queue
    ON CONFLICT (minute, queue, worker_id) DO UPDATE
       SET completed = job_stats.completed + EXCLUDED.completed,
           retried = job_stats.retried + EXCLUDED.retried,
           failed = job_stats.failed + EXCLUDED.failed,
           dead = job_stats.dead + EXCLUDED.dead
), results AS (
    -- handlers' return values, stored with the success they belong to (fenced: only rows in `ok`)
    -- (or, for a value too large to keep, why it was not stored: skiplock.result() says so)
    INSERT INTO job_results (job_id, state, result, error)
    SELECT r.id, 'succeeded', r.value::jsonb, r.error
      FROM unnest(%(res_ids)s::bigint[], %(res_values)s::text[], %(res_errors)s::text[]) AS r(id, value, error)
     WHERE r.id IN (SELECT id FROM ok)
    ON CONFLICT (job_id) DO UPDATE SET state = EXCLUDED.state, result = EXCLUDED.result, error = EXCLUDED.error,
                                      finished_at = now()
), finals AS MATERIALIZED (
    SELECT id, 'succeeded' AS state, batch_id, NULL::text AS head FROM ok
    UNION ALL
    SELECT id, status, batch_id, headline FROM errored WHERE status IN ('dead', 'failed')
), settled AS MATERIALIZED (
    SELECT CASE WHEN pg_sequence_last_value('skiplock_linked') IS NOT NULL
                THEN skiplock_settle(ARRAY(SELECT id FROM finals ORDER BY id),
                                     ARRAY(SELECT state::text FROM finals ORDER BY id),
                                     ARRAY(SELECT batch_id FROM finals ORDER BY id),
                                     ARRAY(SELECT head FROM finals ORDER BY id)) END AS n
)
-- each written job's lock key: its end may let the key's next job be claimed (core.ack_batch_with_keys)
SELECT id, lock_key FROM ok, settled UNION ALL SELECT id, lock_key FROM errored, settled

-- name: ack_batch_to_history
-- Ack a batch, successes moved to the monthly-partitioned jobs_history (SKIPLOCK_HISTORY_MODE=partitioned):
-- DELETE ... RETURNING feeds the INSERT in the same statement, so a row is never in both or neither.
WITH moved AS (
    DELETE FROM jobs j
     USING unnest(%(ok_ids)s::bigint[], %(ok_attempts)s::int[]) AS v(id, attempt)
           CROSS JOIN LATERAL (SELECT x.ctid FROM jobs x
                                WHERE x.id = v.id AND x.attempts = v.attempt AND x.worker_id = %(worker_id)s AND x.status::text = 'running'
                               OFFSET 0) f
     WHERE j.ctid = f.ctid
    RETURNING j.*
), archived AS (
    INSERT INTO jobs_history (id, queue, priority, run_at, created_at, started_at, finished_at,
                              attempts, max_attempts, unique_key, worker_id, last_error, payload, status)
    SELECT id, queue, priority, run_at, created_at, started_at, now(),
           attempts, max_attempts, unique_key, worker_id, last_error, payload, 'succeeded'
      FROM moved
), ok AS (
    SELECT id, queue, lock_key, batch_id FROM moved
), errored AS (
    UPDATE jobs j
       SET status = v.status::job_status,
           run_at = CASE WHEN v.status = 'queued' THEN now() + make_interval(secs => v.delay)
                         ELSE j.run_at END,
           finished_at = CASE WHEN v.status = 'queued' THEN NULL ELSE now() END,
           last_error = v.error,
           error_headline = v.headline,
           error_group = v.grp,
           worker_id = NULL,
           lease_until = NULL,
           progress = NULL  -- a new attempt reports its own
      FROM unnest(%(err_ids)s::bigint[], %(err_attempts)s::int[], %(err_status)s::text[],
                  %(err_delay)s::float8[], %(err_text)s::text[], %(err_headline)s::text[], %(err_group)s::text[])
           AS v(id, attempt, status, delay, error, headline, grp)
           CROSS JOIN LATERAL (SELECT x.ctid FROM jobs x
                                WHERE x.id = v.id AND x.attempts = v.attempt AND x.worker_id = %(worker_id)s AND x.status::text = 'running'
                               OFFSET 0) f
     WHERE j.ctid = f.ctid
    RETURNING j.id, j.queue, v.status, j.lock_key, j.batch_id, v.headline
), stats AS (
    INSERT INTO job_stats (minute, queue, worker_id, completed, retried, failed, dead)
    SELECT date_trunc('minute', now()), s.queue, %(worker_id)s,
           count(*) FILTER (WHERE s.outcome = 'ok'),
           count(*) FILTER (WHERE s.outcome = 'queued'),
           count(*) FILTER (WHERE s.outcome = 'failed'),
           count(*) FILTER (WHERE s.outcome = 'dead')
      FROM (SELECT queue, 'ok' AS outcome FROM ok
            UNION ALL SELECT queue, status FROM errored) s
     GROUP BY s.queue
    ON CONFLICT (minute, queue, worker_id) DO UPDATE
       SET completed = job_stats.completed + EXCLUDED.completed,
           retried = job_stats.retried + EXCLUDED.retried,
           failed = job_stats.failed + EXCLUDED.failed,
           dead = job_stats.dead + EXCLUDED.dead
), results AS (
    -- handlers' return values, stored with the success they belong to (fenced: only rows in `ok`)
    -- (or, for a value too large to keep, why it was not stored: skiplock.result() says so)
    INSERT INTO job_results (job_id, state, result, error)
    SELECT r.id, 'succeeded', r.value::jsonb, r.error
      FROM unnest(%(res_ids)s::bigint[], %(res_values)s::text[], %(res_errors)s::text[]) AS r(id, value, error)
     WHERE r.id IN (SELECT id FROM ok)
    ON CONFLICT (job_id) DO UPDATE SET state = EXCLUDED.state, result = EXCLUDED.result, error = EXCLUDED.error,
                                      finished_at = now()
), finals AS MATERIALIZED (
    SELECT id, 'succeeded' AS state, batch_id, NULL::text AS head FROM ok
    UNION ALL
    SELECT id, status, batch_id, headline FROM errored WHERE status IN ('dead', 'failed')
), settled AS MATERIALIZED (
    SELECT CASE WHEN pg_sequence_last_value('skiplock_linked') IS NOT NULL
                THEN skiplock_settle(ARRAY(SELECT id FROM finals ORDER BY id),
                                     ARRAY(SELECT state::text FROM finals ORDER BY id),
                                     ARRAY(SELECT batch_id FROM finals ORDER BY id),
                                     ARRAY(SELECT head FROM finals ORDER BY id)) END AS n
)
-- each written job's lock key: its end may let the key's next job be claimed (core.ack_batch_with_keys)
SELECT id, lock_key FROM ok, settled UNION ALL SELECT id, lock_key FROM errored, settled
