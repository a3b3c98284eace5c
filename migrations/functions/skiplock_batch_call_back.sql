-- skiplock_batch_call_back: part of the workflows (issue 33; first in 026_workflows.sql, whose text stays as it was
-- for databases that ran it). The current definition: edit it here (migrations/README.md).
-- The design: docs/explanation/workflows-design.md.
--
-- Call a batch back if it is done: sealed, nothing pending, not called back yet. The one place that
-- inserts callbacks (the settle above, the seal at the end of the enqueuing block, the sweeper).
--
-- A callback is written without its task's options (no @task is known here): marked with all three
-- (7: max_attempts, version, lock_key; migration 049), a worker of its queue writes them in.
--
-- writes jobs: yes, because a done batch's callbacks are jobs, and it inserts them
CREATE OR REPLACE FUNCTION skiplock_batch_call_back(p_batch bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    b job_batches;
    complete_id bigint;
    success_id bigint;
BEGIN
    SELECT * INTO b FROM job_batches WHERE id = p_batch FOR UPDATE;
    IF NOT FOUND OR NOT b.sealed OR b.pending > 0 OR b.called_back_at IS NOT NULL THEN
        RETURN false;
    END IF;
    IF b.on_complete IS NOT NULL THEN
        INSERT INTO jobs (queue, payload, task_options_unknown)
        VALUES (b.on_complete->>'queue', coalesce(b.on_complete->'payload', 'null'), 7)
        RETURNING id INTO complete_id;
    END IF;
    IF b.on_success IS NOT NULL AND b.dead = 0 AND b.cancelled = 0 THEN
        INSERT INTO jobs (queue, payload, task_options_unknown)
        VALUES (b.on_success->>'queue', coalesce(b.on_success->'payload', 'null'), 7)
        RETURNING id INTO success_id;
    END IF;
    UPDATE job_batches SET called_back_at = now(), complete_job_id = complete_id, success_job_id = success_id
     WHERE id = p_batch;
    RETURN true;
END $$;
