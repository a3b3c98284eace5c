-- skiplock_delete_schedule: delete a schedule made at runtime, from SQL. Its pending slot's job, queued and
-- never started, is deleted with it (it would otherwise run once more); its slot records go by the foreign
-- key's cascade. A schedule defined in code is refused: remove it from the code. Returns false when there
-- was no schedule of that name.
-- writes jobs: yes, because the deleted schedule's pending job, never started, must not run once more
CREATE OR REPLACE FUNCTION skiplock_delete_schedule(p_name text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_origin text;
BEGIN
    SELECT origin INTO v_origin FROM recurring_schedules WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_origin <> 'runtime' THEN
        RAISE EXCEPTION 'schedule % is defined in code: remove it there', quote_literal(p_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM jobs
     WHERE id IN (SELECT job_id FROM recurring_slots WHERE name = p_name AND NOT manual AND job_id IS NOT NULL)
       AND status = 'queued';
    DELETE FROM recurring_schedules WHERE name = p_name;
    RETURN true;
END;
$$;
