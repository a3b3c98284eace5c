-- skiplock_schedule_slots: the fire times of a schedule in [p_start, p_end], oldest first, computed as the
-- workers compute them (worker/services/schedule.py): an interval's slots are its multiples since the Unix
-- epoch; a crontab's are its wall-clock times in p_timezone, where a wall time repeated by a DST fall-back
-- fires at its first occurrence and one skipped by a spring-forward fires just after the jump. Day of month
-- and day of week, when both are restricted, match either (as cron does). At most p_limit slots.
-- writes jobs: no
CREATE OR REPLACE FUNCTION skiplock_schedule_slots(
    p_kind text, p_schedule text, p_timezone text, p_start timestamptz, p_end timestamptz, p_limit int)
    RETURNS SETOF timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_seconds bigint;
    v_f text[];
    v_minutes int[];
    v_hours int[];
    v_days int[];
    v_months int[];
    v_weekdays int[];
    v_either boolean;
BEGIN
    IF p_kind = 'interval' THEN
        SELECT sum(m[1]::bigint * CASE m[2] WHEN 's' THEN 1 WHEN 'm' THEN 60 WHEN 'h' THEN 3600 ELSE 86400 END)
          INTO v_seconds FROM regexp_matches(lower(p_schedule), '([0-9]+)\s*([smhd])', 'g') AS m;
        RETURN QUERY
            SELECT to_timestamp(k * v_seconds)
              FROM generate_series(ceil(extract(epoch FROM p_start) / v_seconds)::bigint,
                                   floor(extract(epoch FROM p_end) / v_seconds)::bigint) AS k
             LIMIT p_limit;
        RETURN;
    END IF;
    v_f := string_to_array(p_schedule, ' ');
    v_minutes := skiplock_cron_values(v_f[1], 0, 59, NULL);
    v_hours := skiplock_cron_values(v_f[2], 0, 23, NULL);
    v_days := skiplock_cron_values(v_f[3], 1, 31, NULL);
    v_months := skiplock_cron_values(v_f[4], 1, 12, ARRAY['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug',
                                                         'sep', 'oct', 'nov', 'dec']);
    v_weekdays := skiplock_cron_values(v_f[5], 0, 7, ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat']);
    v_either := v_f[3] NOT LIKE '*%' AND v_f[5] NOT LIKE '*%';
    RETURN QUERY
        SELECT DISTINCT fire
          FROM generate_series(date_trunc('day', p_start AT TIME ZONE p_timezone) - interval '1 day',
                               p_end AT TIME ZONE p_timezone + interval '1 day', interval '1 day') AS d,
               unnest(v_hours) AS h, unnest(v_minutes) AS mi,
               LATERAL (SELECT d + make_interval(hours => h, mins => mi) AS wall) w,
               LATERAL (SELECT w.wall AT TIME ZONE p_timezone AS later) l,
               LATERAL (SELECT CASE WHEN (l.later - interval '1 hour') AT TIME ZONE p_timezone = w.wall
                                    THEN l.later - interval '1 hour' ELSE l.later END AS fire) f
         WHERE extract(month FROM d)::int = ANY(v_months)
           AND CASE WHEN v_either THEN extract(day FROM d)::int = ANY(v_days) OR extract(dow FROM d)::int = ANY(v_weekdays)
                    ELSE extract(day FROM d)::int = ANY(v_days) AND extract(dow FROM d)::int = ANY(v_weekdays) END
           AND fire BETWEEN p_start AND p_end
         ORDER BY fire
         LIMIT p_limit;
END;
$$;
