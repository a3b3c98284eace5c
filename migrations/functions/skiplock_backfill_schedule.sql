-- skiplock_backfill_schedule: enqueue every slot of a schedule in [p_start, p_end] (and before now) that was
-- never enqueued, from SQL, like skiplock.schedules.backfill: each slot is recorded in recurring_slots (its
-- primary key makes a slot the scheduler or an earlier backfill enqueued a no-op), and its job is due at
-- once, with the schedule's payload and tenant and the slot's unique key. Repeating it is safe. More than
-- 10,000 slots, an end before the start or an unknown name raise, and nothing is written. Returns the number
-- of jobs enqueued.
-- writes jobs: yes, because a backfill enqueues the jobs of the slots it records, in the same transaction
CREATE OR REPLACE FUNCTION skiplock_backfill_schedule(p_name text, p_start timestamptz, p_end timestamptz)
    RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_row recurring_schedules%ROWTYPE;
    v_slots timestamptz[];
    v_new timestamptz[];
    v_max constant int := 10000;  -- as skiplock.schedules.MAX_BACKFILL: a wider range is more likely a typo
    v_count int;
BEGIN
    IF p_start IS NULL OR p_end IS NULL OR p_end < p_start THEN
        RAISE EXCEPTION 'backfill of %: end % is before its start %', quote_literal(p_name), p_end, p_start
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_row FROM recurring_schedules WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no schedule named %', quote_literal(p_name) USING ERRCODE = 'no_data_found';
    END IF;
    v_slots := ARRAY(SELECT skiplock_schedule_slots(v_row.kind, v_row.schedule, v_row.timezone, p_start,
                                                    least(p_end, now()), v_max + 1));
    IF cardinality(v_slots) > v_max THEN
        RAISE EXCEPTION 'backfill of % covers more than % slots; give a shorter range', quote_literal(p_name),
            v_max USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH recorded AS (
        INSERT INTO recurring_slots (name, fire_at) SELECT p_name, f FROM unnest(v_slots) AS f
        ON CONFLICT (name, fire_at) DO NOTHING
        RETURNING fire_at)
    SELECT array_agg(fire_at) INTO v_new FROM recorded;
    IF v_new IS NULL THEN
        RETURN 0;
    END IF;
    -- the slot's key as the workers write it (recurring_store.slot_key): its UTC time in ISO 8601
    WITH enqueued AS (
        INSERT INTO jobs (queue, payload, run_at, unique_key, tenant, max_attempts, version)
        SELECT v_row.queue, v_row.payload, f,
               'recurring:' || p_name || ':' || to_char(f AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') || '+00:00',
               v_row.tenant, coalesce(d.max_attempts, 20), coalesce(d.version, 1)
          FROM unnest(v_new) AS f
          LEFT JOIN task_defaults d ON d.queue = v_row.queue
        ON CONFLICT (unique_key) WHERE status IN ('queued', 'running') DO NOTHING
        RETURNING id, run_at)
    UPDATE recurring_slots s SET job_id = e.id FROM enqueued e WHERE s.name = p_name AND s.fire_at = e.run_at;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;
