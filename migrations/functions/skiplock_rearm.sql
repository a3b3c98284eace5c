-- skiplock_rearm: part of the workflows (issue 33; first in 026_workflows.sql, whose text stays as it was
-- for databases that ran it). The current definition: edit it here (migrations/README.md).
-- The design: docs/explanation/workflows-design.md.
--
-- A job with parents that was just put back to queued by a retry: it waits for its open parents,
-- or ends at once when a parent it needs ended badly (retry that parent instead).
--
-- writes jobs: yes, because a retried job with parents waits again, or ends at once when a parent it needs failed
CREATE OR REPLACE FUNCTION skiplock_rearm(p_ids bigint[]) RETURNS bigint[]
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    ended bigint[];
BEGIN
    WITH rearmed AS (
    UPDATE jobs j
       SET status = CASE WHEN x.bad IS NOT NULL AND j.on_dependency_failure IS NULL
                             THEN (CASE WHEN x.bad_state = 'dead' THEN 'dead' ELSE 'failed' END)::job_status
                         WHEN x.open > 0 THEN 'waiting'::job_status
                         ELSE 'queued'::job_status END,
           waiting_on = x.open,
           finished_at = CASE WHEN x.bad IS NOT NULL AND j.on_dependency_failure IS NULL THEN now() END,
           last_error = CASE WHEN x.bad IS NOT NULL AND j.on_dependency_failure IS NULL
                             THEN concat_ws(E'\n', 'retried, but dependency ' || x.bad || ' is still ' || x.bad_state
                                            || ': retry it instead', j.last_error)
                             ELSE j.last_error END
      FROM (SELECT e.child,
                   count(*) FILTER (WHERE e.parent_state IS NULL)::int AS open,
                   min(e.parent) FILTER (WHERE e.parent_state IN ('dead', 'failed')) AS bad,
                   (array_agg(e.parent_state::text ORDER BY e.parent)
                        FILTER (WHERE e.parent_state IN ('dead', 'failed')))[1] AS bad_state
              FROM job_deps e WHERE e.child = ANY(p_ids) GROUP BY e.child) x
     WHERE j.id = x.child AND j.id = ANY(p_ids) AND j.status = 'queued'
    RETURNING j.id, j.status
    )
    SELECT coalesce(array_agg(id) FILTER (WHERE status IN ('dead', 'failed')), '{}') INTO ended FROM rearmed;
    RETURN ended;
END $$;
