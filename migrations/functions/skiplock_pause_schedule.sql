-- skiplock_pause_schedule: pause a schedule (made at runtime or in code), from SQL, like
-- skiplock.schedules.pause: no new slot is enqueued and its pending job, not started yet, is withdrawn.
-- Returns true if it was running, false if it was already paused; an unknown name raises.
-- writes jobs: yes, through skiplock_withdraw_schedule_slots (the pending job of a paused schedule must not run)
CREATE OR REPLACE FUNCTION skiplock_pause_schedule(p_name text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM recurring_schedules WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no schedule named %', quote_literal(p_name) USING ERRCODE = 'no_data_found';
    END IF;
    UPDATE recurring_schedules SET enabled = false, next_fire_at = NULL, plan_at = NULL, updated_at = now()
     WHERE name = p_name AND enabled;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM skiplock_withdraw_schedule_slots(p_name);
    RETURN true;
END;
$$;
