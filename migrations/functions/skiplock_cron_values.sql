-- skiplock_cron_values: the values one crontab field stands for, e.g. '*/15' in minutes -> {0,15,30,45},
-- 'mon-fri' in days of week -> {1,2,3,4,5} (Sunday is 0, and 7 is Sunday too). p_names are the field's names
-- (months from 1, weekdays from 0) or NULL. The field is assumed checked (skiplock_check_schedule).
-- Used by skiplock_schedule_slots for backfills from SQL.
-- writes jobs: no
CREATE OR REPLACE FUNCTION skiplock_cron_values(p_field text, p_lo int, p_hi int, p_names text[]) RETURNS int[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_item text;
    v_range text;
    v_step int;
    v_first int;
    v_last int;
    v_values int[] := '{}';
    v_offset int := CASE WHEN p_lo = 0 THEN 1 ELSE 0 END;  -- weekday names start at 0, month names at 1
BEGIN
    FOREACH v_item IN ARRAY string_to_array(lower(p_field), ',') LOOP
        v_range := split_part(v_item, '/', 1);
        v_step := coalesce(nullif(split_part(v_item, '/', 2), '')::int, 1);
        IF v_range = '*' THEN
            v_first := p_lo;
            v_last := CASE WHEN p_hi = 7 THEN 6 ELSE p_hi END;
        ELSE
            v_first := CASE WHEN split_part(v_range, '-', 1) ~ '^[0-9]+$' THEN split_part(v_range, '-', 1)::int
                            ELSE array_position(p_names, left(split_part(v_range, '-', 1), 3)) - v_offset END;
            IF v_range LIKE '%-%' THEN
                v_last := CASE WHEN split_part(v_range, '-', 2) ~ '^[0-9]+$' THEN split_part(v_range, '-', 2)::int
                               ELSE array_position(p_names, left(split_part(v_range, '-', 2), 3)) - v_offset END;
            ELSIF v_item LIKE '%/%' THEN
                v_last := CASE WHEN p_hi = 7 THEN 6 ELSE p_hi END;
            ELSE
                v_last := v_first;
            END IF;
        END IF;
        v_values := v_values || ARRAY(SELECT g FROM generate_series(v_first, v_last, v_step) g);
    END LOOP;
    IF p_hi = 7 THEN  -- day of week: 7 is Sunday
        v_values := ARRAY(SELECT DISTINCT v % 7 FROM unnest(v_values) v);
    END IF;
    RETURN v_values;
END;
$$;
