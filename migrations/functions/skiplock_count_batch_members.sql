-- skiplock_count_batch_members: part of the workflows (issue 33; first in 026_workflows.sql, whose text stays as it was
-- for databases that ran it). The current definition: edit it here (migrations/README.md).
-- The design: docs/explanation/workflows-design.md.
--
-- Members that reached a final state, counted into their batches; the batch whose last member this
-- was (and whose enqueuing block has ended) calls back: exactly once, under the batch row's lock.
--
-- writes jobs: yes, through skiplock_batch_call_back: a batch's last member inserts its callbacks
CREATE OR REPLACE FUNCTION skiplock_count_batch_members(p_ids bigint[], p_states text[], p_batches bigint[])
RETURNS void LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    b record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM unnest(p_batches) x WHERE x IS NOT NULL) THEN
        RETURN;
    END IF;
    FOR b IN
        WITH members AS (
            SELECT m.batch, m.state FROM unnest(p_batches, p_states) AS m(batch, state) WHERE m.batch IS NOT NULL
        ), per_batch AS (
            SELECT batch, count(*)::int AS n,
                   count(*) FILTER (WHERE state = 'succeeded')::int AS ok,
                   count(*) FILTER (WHERE state = 'dead')::int AS dead,
                   count(*) FILTER (WHERE state = 'failed')::int AS cancelled
              FROM members GROUP BY batch
        )
        SELECT * FROM per_batch ORDER BY batch
    LOOP
        UPDATE job_batches
           SET pending = pending - b.n, succeeded = succeeded + b.ok, dead = dead + b.dead,
               cancelled = cancelled + b.cancelled
         WHERE id = b.batch;
        PERFORM skiplock_batch_call_back(b.batch);
    END LOOP;
END $$;
