-- skiplock_resume_schedule: resume a paused schedule, from SQL, like skiplock.schedules.resume: it goes on from
-- its next slot after now (the slots it was paused for are not caught up; backfill them if they matter),
-- enqueued by the next pass of any worker's scheduler. Returns true if it was paused, false if it was
-- running; an unknown name raises.
-- writes jobs: no
CREATE OR REPLACE FUNCTION skiplock_resume_schedule(p_name text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM recurring_schedules WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no schedule named %', quote_literal(p_name) USING ERRCODE = 'no_data_found';
    END IF;
    UPDATE recurring_schedules SET enabled = true, next_fire_at = NULL, plan_at = NULL, updated_at = now()
     WHERE name = p_name AND NOT enabled;
    RETURN FOUND;
END;
$$;
