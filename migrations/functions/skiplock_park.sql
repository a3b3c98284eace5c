-- skiplock_park: a durable job parks (job.sleep, job.sleep_until, job.wait_for), in one transaction.
-- The design: docs/explanation/durable-jobs.md. The current definition: edit it here (migrations/README.md).
-- writes jobs: yes, because a parking job moves running -> parked with its wait and cursors under the key's lock
--
-- Writes jobs: running -> parked, fenced on the worker and the attempt, the attempt given back. It is a
-- function, not a statement, because parking must read the key's signal under the key's advisory lock and
-- then write the job, its cursors and its wait row in that same transaction: a signal that races the park
-- either is found here or finds the parked job (skiplock_signal takes the same lock).
--
-- p_step:    the step that remembers the wait: 'sleep:<name>' (its wake time) or, for a wait, NULL.
-- p_key:     the signal key of a wait (NULL for a sleep).
-- p_until:   a sleep's wake time; NULL with p_seconds: now() + p_seconds. For a wait: NULL.
-- p_seconds: a sleep's length when p_until is NULL; a wait's timeout (NULL: none).
-- p_cursor_names / p_cursor_values: the run's cursors not yet written (JSON texts), written in every
--   outcome but 'lost'.
-- Returns (outcome, value):
--   ('parked', NULL)     the job is parked;
--   ('passed', NULL)     a sleep whose stored time has come: the handler goes on;
--   ('signal', payload)  a wait whose signal was already sent: recorded as the step, the handler goes on;
--   ('timeout', NULL)    a wait whose stored deadline has passed: recorded as the step;
--   ('lost', NULL)       this run no longer owns the job (reaped or released): nothing written.
CREATE OR REPLACE FUNCTION skiplock_park(p_job bigint, p_worker text, p_attempt int, p_step text, p_key text,
                                         p_until timestamptz, p_seconds float8,
                                         p_cursor_names text[], p_cursor_values text[],
                                         OUT outcome text, OUT value jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    wake timestamptz;
    queue_name text;
    sent jsonb;
BEGIN
    IF p_key IS NOT NULL THEN
        -- the signal's lock (skiplock_signal): whichever of the two commits second sees the other's rows
        PERFORM pg_advisory_xact_lock(1936418931, hashtext(p_key));
    END IF;
    SELECT j.queue INTO queue_name FROM jobs j
     WHERE j.id = p_job AND j.worker_id = p_worker AND j.attempts = p_attempt AND j.status = 'running'
       FOR UPDATE;
    IF queue_name IS NULL THEN
        outcome := 'lost';
        RETURN;
    END IF;
    -- the run's cursors, whatever follows: it parks, or it goes on and the next flush needs none of these
    INSERT INTO job_cursors (job_id, name, value, saved_at)
    SELECT p_job, c.name, c.value::jsonb, now() FROM unnest(p_cursor_names, p_cursor_values) AS c(name, value)
    ON CONFLICT (job_id, name) DO UPDATE SET value = EXCLUDED.value, saved_at = EXCLUDED.saved_at;

    IF p_key IS NOT NULL THEN
        SELECT s.payload INTO sent FROM job_signals s WHERE s.key = p_key;
        IF FOUND THEN  -- the signal came first: the wait returns it now, and every later run too
            INSERT INTO job_steps (job_id, name, result, attempt)
            VALUES (p_job, 'wait_for:' || p_key, jsonb_build_object('payload', sent), p_attempt)
            ON CONFLICT (job_id, name) DO NOTHING;
            outcome := 'signal';
            value := sent;
            RETURN;
        END IF;
        -- the deadline is set by the first park and kept: an early wake does not extend it
        IF p_seconds IS NOT NULL THEN
            INSERT INTO job_steps (job_id, name, result, attempt)
            VALUES (p_job, 'timeout:' || p_key, to_jsonb(now() + make_interval(secs => p_seconds)), p_attempt)
            ON CONFLICT (job_id, name) DO NOTHING;
        END IF;
        SELECT (st.result #>> '{}')::timestamptz INTO wake FROM job_steps st
         WHERE st.job_id = p_job AND st.name = 'timeout:' || p_key;
        IF wake IS NOT NULL AND wake <= now() THEN
            INSERT INTO job_steps (job_id, name, result, attempt)
            VALUES (p_job, 'wait_for:' || p_key, '{"timeout": true}', p_attempt)
            ON CONFLICT (job_id, name) DO NOTHING;
            outcome := 'timeout';
            RETURN;
        END IF;
        -- no timeout: "never" is 9999-12-31, not 'infinity', which psycopg cannot read into a datetime (every
        -- reader of jobs.run_at, the console's included, would fail on a parked job)
        wake := coalesce(wake, '9999-12-31 00:00:00+00');
    ELSE
        -- a sleep: its wake time is stored once, by the first run that reaches it
        INSERT INTO job_steps (job_id, name, result, attempt)
        VALUES (p_job, p_step, to_jsonb(coalesce(p_until, now() + make_interval(secs => p_seconds))), p_attempt)
        ON CONFLICT (job_id, name) DO NOTHING;
        SELECT (st.result #>> '{}')::timestamptz INTO wake FROM job_steps st
         WHERE st.job_id = p_job AND st.name = p_step;
        IF wake <= now() THEN
            outcome := 'passed';
            RETURN;
        END IF;
    END IF;

    UPDATE jobs SET status = 'parked', worker_id = NULL, lease_until = NULL, run_at = wake,
                    attempts = greatest(attempts - 1, 0)
     WHERE id = p_job;
    INSERT INTO job_waits (job_id, queue, sleep, key, wake_at)
    VALUES (p_job, queue_name, CASE WHEN p_key IS NULL THEN substr(p_step, 7) END, p_key, wake)
    ON CONFLICT (job_id) DO UPDATE SET queue = EXCLUDED.queue, sleep = EXCLUDED.sleep, key = EXCLUDED.key,
                                       wake_at = EXCLUDED.wake_at, parked_at = now();
    outcome := 'parked';
END $$;
