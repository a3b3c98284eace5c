-- skiplock_check_schedule: the checks of a schedule's input shared by skiplock_create_schedule and
-- skiplock_update_schedule; raises invalid_parameter_value with a message naming the bad part, or returns the
-- schedule's kind ('cron' or 'interval') and its stored text. Give exactly one of p_cron or p_every.
-- A crontab is checked field by field: 5 fields, each a list of *, a number or a name, a range a-b, with an
-- optional /step, within its field's range (minute 0-59, hour 0-23, day 1-31, month 1-12 or jan-dec, day of
-- week 0-7 or sun-sat). A time zone must be an IANA name PostgreSQL knows.
-- writes jobs: no
CREATE OR REPLACE FUNCTION skiplock_check_schedule(
    p_name text, p_cron text, p_every text, p_timezone text, OUT kind text, OUT schedule text)
LANGUAGE plpgsql AS $$
DECLARE
    v_fields text[];
    v_item text;
    v_part text;
    v_lo int[] := ARRAY[0, 0, 1, 1, 0];
    v_hi int[] := ARRAY[59, 23, 31, 12, 7];
    v_what text[] := ARRAY['minute', 'hour', 'day of month', 'month', 'day of week'];
    v_names text[];
    v_value int;
    v_i int;
BEGIN
    IF (p_cron IS NULL) = (p_every IS NULL) THEN
        RAISE EXCEPTION 'schedule %: give exactly one of p_cron or p_every', p_name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_cron IS NOT NULL THEN
        kind := 'cron';
        schedule := regexp_replace(btrim(p_cron), '\s+', ' ', 'g');
        v_fields := string_to_array(schedule, ' ');
        IF coalesce(array_length(v_fields, 1), 0) <> 5 THEN
            RAISE EXCEPTION 'schedule %: invalid cron schedule %: a crontab has 5 fields', p_name,
                quote_literal(p_cron) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR v_i IN 1..5 LOOP
            v_names := CASE v_i WHEN 4 THEN ARRAY['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep',
                                                  'oct', 'nov', 'dec']
                                WHEN 5 THEN ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] END;
            FOREACH v_item IN ARRAY string_to_array(lower(v_fields[v_i]), ',') LOOP
                IF v_item !~ '^(\*|[a-z0-9]+(-[a-z0-9]+)?)(/[0-9]+)?$' OR v_item ~ '/0+$' THEN
                    RAISE EXCEPTION 'schedule %: invalid cron schedule %: % field % is not *, a value or a '
                        'range, with an optional /step', p_name, quote_literal(p_cron), v_what[v_i],
                        quote_literal(v_fields[v_i]) USING ERRCODE = 'invalid_parameter_value';
                END IF;
                FOREACH v_part IN ARRAY regexp_split_to_array(split_part(v_item, '/', 1), '-') LOOP
                    CONTINUE WHEN v_part = '*';
                    v_value := CASE WHEN v_part ~ '^[0-9]{1,4}$' THEN v_part::int
                                    WHEN v_names IS NOT NULL THEN array_position(v_names, left(v_part, 3))
                                                                   - CASE v_i WHEN 5 THEN 1 ELSE 0 END END;
                    IF v_value IS NULL OR v_value NOT BETWEEN v_lo[v_i] AND v_hi[v_i] THEN
                        RAISE EXCEPTION 'schedule %: invalid cron schedule %: % % is not within %-%', p_name,
                            quote_literal(p_cron), v_what[v_i], quote_literal(v_part), v_lo[v_i], v_hi[v_i]
                            USING ERRCODE = 'invalid_parameter_value';
                    END IF;
                END LOOP;
            END LOOP;
        END LOOP;
    ELSE
        kind := 'interval';
        schedule := btrim(p_every);
        IF schedule !~ '^([0-9]+ *[smhd] *)+$' OR schedule ~ '^(0+ *[smhd] *)+$' THEN
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
END;
$$;
