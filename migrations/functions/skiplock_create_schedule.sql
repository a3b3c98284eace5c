-- skiplock_create_schedule: a schedule made at runtime, from SQL (producers in other languages). The same row
-- as skiplock.schedules.create writes; the next pass of any worker's scheduler enqueues its first slot.
-- Give exactly one of p_cron (5 fields, read in p_timezone) or p_every ('30s', '5m', '1h30m', '1d').
-- The checks here are the input's and each cron field's (skiplock_check_schedule) and the time zone's; a
-- crontab that can never fire ('0 0 30 2 *') is caught by the worker, which logs it and goes on with the others.
-- Bad input raises, and nothing is written.
-- writes jobs: no
CREATE OR REPLACE FUNCTION skiplock_create_schedule(
    p_name text, p_queue text, p_payload jsonb DEFAULT 'null', p_cron text DEFAULT NULL, p_every text DEFAULT NULL,
    p_timezone text DEFAULT 'UTC', p_tenant text DEFAULT NULL) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_kind text;
    v_text text;
BEGIN
    IF coalesce(btrim(p_name), '') = '' OR length(p_name) > 200 THEN
        RAISE EXCEPTION 'schedule needs a name of 1-200 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(btrim(p_queue), '') = '' OR length(p_queue) > 128 THEN
        RAISE EXCEPTION 'schedule %: queue must be a non-empty name of at most 128 characters', p_name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT c.kind, c.schedule INTO v_kind, v_text FROM skiplock_check_schedule(p_name, p_cron, p_every, p_timezone) c;
    INSERT INTO recurring_schedules (name, queue, kind, schedule, timezone, payload, tenant, origin)
    VALUES (p_name, p_queue, v_kind, v_text, p_timezone, coalesce(p_payload, 'null'), p_tenant, 'runtime')
    ON CONFLICT (name) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'a schedule named % already exists', quote_literal(p_name) USING ERRCODE = 'unique_violation';
    END IF;
    RETURN p_name;
END;
$$;
