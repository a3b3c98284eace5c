-- skiplock_signal: send a durable job's signal (skiplock.signal, the CLI, the console, or SQL itself).
-- The design: docs/explanation/durable-jobs.md. The current definition: edit it here (migrations/README.md).
-- writes jobs: yes, because a signal moves every job parked on its key to queued under the key's lock
--
-- Writes jobs: every job parked on the key, parked -> queued, in the caller's transaction. It is a
-- function so that any producer that knows only SQL can signal (SELECT skiplock_signal('order-42:paid',
-- '{"amount": 10}')), and because it must take the key's advisory lock before it looks for waiters, the
-- lock skiplock_park takes: a wait and a signal that race are handled in every order.
--
-- The first signal of a key wins: a repeated one changes nothing and wakes no one. Every job parked on the
-- key wakes, and the payload is recorded as each one's step wait_for:<key>, so its later runs see the same
-- answer after the signal is pruned. The workers of their queues are notified (the listener claims for a
-- queue it serves). Returns how many jobs it woke.
CREATE OR REPLACE FUNCTION skiplock_signal(p_key text, p_payload jsonb DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    woken int;
    queues text[];
BEGIN
    IF p_key IS NULL THEN
        RAISE EXCEPTION 'skiplock_signal: the key must not be NULL';
    END IF;
    PERFORM pg_advisory_xact_lock(1936418931, hashtext(p_key));
    INSERT INTO job_signals (key, payload) VALUES (p_key, p_payload) ON CONFLICT (key) DO NOTHING;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    -- jobs first, then their wait rows: the wake pass locks them in this order too
    WITH waiters AS (
        SELECT w.job_id FROM job_waits w WHERE w.key = p_key
    ), woke AS (
        UPDATE jobs j SET status = 'queued', run_at = now()
          FROM waiters
         WHERE j.id = waiters.job_id AND j.status = 'parked'
        RETURNING j.id, j.queue, j.attempts
    ), gone AS (
        DELETE FROM job_waits w USING woke WHERE w.job_id = woke.id AND w.key = p_key
        RETURNING w.job_id
    ), recorded AS (
        INSERT INTO job_steps (job_id, name, result, attempt)
        SELECT woke.id, 'wait_for:' || p_key, jsonb_build_object('payload', p_payload), woke.attempts
          FROM woke JOIN gone ON gone.job_id = woke.id
        ON CONFLICT (job_id, name) DO NOTHING
    )
    -- (a data-modifying CTE runs to its end whether or not it is read)
    SELECT count(*)::int, array_agg(DISTINCT woke.queue) INTO woken, queues FROM woke;
    IF woken > 0 THEN
        PERFORM pg_notify('skiplock_jobs', q) FROM unnest(queues) AS q;
    END IF;
    RETURN woken;
END $$;
