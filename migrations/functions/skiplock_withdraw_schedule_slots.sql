-- skiplock_withdraw_schedule_slots: the pending jobs of a schedule's slots, queued and never started, are
-- deleted with their slot records, so a changed or paused schedule does not run once more the old way and a
-- withdrawn slot may be planned again (it never ran). Manual ("run now") instances are left alone. Returns how
-- many jobs it withdrew. Called by skiplock_update_schedule and skiplock_pause_schedule.
-- writes jobs: yes, because a changed or paused schedule's pending job, never started, must not run
CREATE OR REPLACE FUNCTION skiplock_withdraw_schedule_slots(p_name text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_ids bigint[];
BEGIN
    WITH gone AS (
        DELETE FROM jobs
         WHERE id IN (SELECT job_id FROM recurring_slots WHERE name = p_name AND NOT manual AND job_id IS NOT NULL)
           AND status = 'queued'
        RETURNING id)
    SELECT array_agg(id) INTO v_ids FROM gone;
    DELETE FROM recurring_slots WHERE name = p_name AND job_id = ANY(v_ids);
    RETURN coalesce(cardinality(v_ids), 0);
END;
$$;
