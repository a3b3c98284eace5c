-- skiplock_enqueue_after: part of the workflows (issue 33; first in 026_workflows.sql, whose text stays as it was
-- for databases that ran it). The current definition: edit it here (migrations/README.md).
-- The design: docs/explanation/workflows-design.md.
--
-- The SQL-only producer's enqueue of a dependent job (see the workflows guide): one call, one job,
-- the same rules as enqueue(depends_on=...). Returns the new job's id.
--
-- writes jobs: yes, because it is the SQL-only producer's insert of a dependent job
CREATE OR REPLACE FUNCTION skiplock_enqueue_after(p_queue text, p_payload jsonb, p_parents bigint[],
                                                  p_on_dependency_failure text DEFAULT NULL,
                                                  p_priority int DEFAULT 0) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    root bigint;
    new_id bigint;
    parents bigint[];
BEGIN
    SELECT array_agg(DISTINCT p) INTO parents FROM unnest(p_parents) AS p;
    IF parents IS NULL THEN
        INSERT INTO jobs (queue, payload, priority) VALUES (p_queue, p_payload, p_priority) RETURNING id INTO new_id;
        RETURN new_id;
    END IF;
    root := skiplock_check_parents(parents);
    INSERT INTO jobs (queue, payload, priority, status, waiting_on, on_dependency_failure, workflow_id)
    VALUES (p_queue, p_payload, p_priority, 'waiting', cardinality(parents), p_on_dependency_failure, root)
    RETURNING id INTO new_id;
    -- each edge keeps both jobs' queues (migration 048), so the console names them after their rows are gone
    INSERT INTO job_deps (parent, child, parent_queue, child_queue)
    SELECT p, new_id, (SELECT pj.queue FROM jobs pj WHERE pj.id = p), p_queue FROM unnest(parents) AS p;
    RETURN new_id;
END $$;
