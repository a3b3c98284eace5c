-- skiplock_create_schedule: a schedule made at runtime, from SQL (producers in other languages). The same row
-- as skiplock.schedules.create writes; the next pass of any worker's scheduler enqueues its first slot.
-- Give exactly one of p_cron (5 fields, read in p_timezone) or p_every ('30s', '5m', '1h30m', '1d').
-- The checks here are the shape of the input and the time zone; a crontab that can never fire
-- ('0 0 30 2 *') is caught by the worker, which logs it and goes on with the other schedules.
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
    IF (p_cron IS NULL) = (p_every IS NULL) THEN
        RAISE EXCEPTION 'schedule %: give exactly one of p_cron or p_every', p_name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_cron IS NOT NULL THEN
        v_kind := 'cron';
        v_text := regexp_replace(btrim(p_cron), '\s+', ' ', 'g');
        IF v_text !~ '^[0-9A-Za-z*/,?-]+( [0-9A-Za-z*/,?-]+){4}$' THEN
            RAISE EXCEPTION 'schedule %: invalid cron schedule %: a crontab has 5 fields', p_name, quote_literal(p_cron)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    ELSE
        v_kind := 'interval';
        v_text := btrim(p_every);
        IF v_text !~ '^([0-9]+ *[smhd] *)+$' OR v_text ~ '^(0+ *[smhd] *)+$' THEN
            RAISE EXCEPTION 'schedule %: invalid interval schedule %: use like 30s, 5m, 1h30m, 1d', p_name,
                quote_literal(p_every) USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    -- An IANA name (not an offset like 'UTC+3', which PostgreSQL reads backwards), and one PostgreSQL knows:
    -- AT TIME ZONE raises for any other. pg_timezone_names would read the whole zone database per call.
    BEGIN
        IF coalesce(p_timezone, '') !~ '^[A-Za-z][A-Za-z_-]*(/[A-Za-z0-9_+-]+)*$' THEN
            RAISE invalid_parameter_value;
        END IF;
        PERFORM now() AT TIME ZONE p_timezone;
    EXCEPTION WHEN invalid_parameter_value THEN
        RAISE EXCEPTION 'schedule %: unknown time zone % (use an IANA name like Europe/Berlin)', p_name,
            quote_literal(p_timezone) USING ERRCODE = 'invalid_parameter_value';
    END;
    INSERT INTO recurring_schedules (name, queue, kind, schedule, timezone, payload, tenant, origin)
    VALUES (p_name, p_queue, v_kind, v_text, p_timezone, coalesce(p_payload, 'null'), p_tenant, 'runtime')
    ON CONFLICT (name) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'a schedule named % already exists', quote_literal(p_name) USING ERRCODE = 'unique_violation';
    END IF;
    RETURN p_name;
END;
$$;
