-- skiplock_update_schedule: change a schedule made at runtime, from SQL, like skiplock.schedules.update. A NULL
-- argument keeps that setting (p_tenant => '' removes the tenant); give p_cron or p_every to change when it
-- fires (the other is dropped). Its pending job, not started yet, is withdrawn and the next pass of any
-- worker's scheduler plans it again from now. Bad input (an invalid cron or interval, an unknown time zone,
-- an unknown name, a schedule defined in code) raises, and nothing is written. Returns the name.
-- writes jobs: yes, through skiplock_withdraw_schedule_slots (the pending job of the old settings must not run)
CREATE OR REPLACE FUNCTION skiplock_update_schedule(
    p_name text, p_queue text DEFAULT NULL, p_payload jsonb DEFAULT NULL, p_cron text DEFAULT NULL,
    p_every text DEFAULT NULL, p_timezone text DEFAULT NULL, p_tenant text DEFAULT NULL) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_row recurring_schedules%ROWTYPE;
    v_kind text;
    v_text text;
BEGIN
    SELECT * INTO v_row FROM recurring_schedules WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no schedule named %', quote_literal(p_name) USING ERRCODE = 'no_data_found';
    END IF;
    IF v_row.origin <> 'runtime' THEN
        RAISE EXCEPTION 'schedule % is defined in code: change it there', quote_literal(p_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_queue IS NOT NULL AND (btrim(p_queue) = '' OR length(p_queue) > 128) THEN
        RAISE EXCEPTION 'schedule %: queue must be a non-empty name of at most 128 characters', p_name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_cron IS NULL AND p_every IS NULL THEN
        SELECT c.kind, c.schedule INTO v_kind, v_text FROM skiplock_check_schedule(p_name,
            CASE WHEN v_row.kind = 'cron' THEN v_row.schedule END,
            CASE WHEN v_row.kind = 'interval' THEN v_row.schedule END,
            coalesce(p_timezone, v_row.timezone)) c;
    ELSE
        SELECT c.kind, c.schedule INTO v_kind, v_text
          FROM skiplock_check_schedule(p_name, p_cron, p_every, coalesce(p_timezone, v_row.timezone)) c;
    END IF;
    UPDATE recurring_schedules
       SET queue = coalesce(p_queue, queue), payload = coalesce(p_payload, payload), kind = v_kind,
           schedule = v_text, timezone = coalesce(p_timezone, timezone),
           tenant = CASE WHEN p_tenant IS NULL THEN tenant ELSE nullif(p_tenant, '') END,
           next_fire_at = NULL, plan_at = NULL, updated_at = now()
     WHERE name = p_name;
    PERFORM skiplock_withdraw_schedule_slots(p_name);
    RETURN p_name;
END;
$$;
