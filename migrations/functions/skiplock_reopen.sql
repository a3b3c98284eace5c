-- skiplock_reopen: part of the workflows (issue 33; first in 026_workflows.sql, whose text stays as it was
-- for databases that ran it). The current definition: edit it here (migrations/README.md).
-- The design: docs/explanation/workflows-design.md.
--
-- Called after an operator's retry moved `p_ids` from dead/failed back to queued (p_old_states: what
-- they were). A retried job that has parents is re-evaluated against them (it waits for the open
-- ones, or ends again at once when a parent it needs stays failed); its own settled edges re-open,
-- so children still waiting count it again and children that ended only because of it wait again
-- (transitively); its batch counts it as pending again (a batch that already called back never
-- calls back twice).
--
-- writes jobs: yes, because a retry re-opens what the job had settled: its dependents wait or queue again
CREATE OR REPLACE FUNCTION skiplock_reopen(p_ids bigint[], p_old_states text[]) RETURNS int
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    ids bigint[] := p_ids;
    olds text[] := p_old_states;
    nxt record;
    ended_again bigint[];
    total int := 0;
    rounds int := 0;
BEGIN
    -- the retried jobs themselves, when they have parents; one that ends again at once re-opens nothing
    ended_again := skiplock_rearm(p_ids);
    SELECT coalesce(array_agg(o.id), '{}'), coalesce(array_agg(o.old), '{}') INTO ids, olds
      FROM unnest(p_ids, p_old_states) AS o(id, old) WHERE o.id <> ALL(ended_again);
    WHILE coalesce(cardinality(ids), 0) > 0 LOOP
        rounds := rounds + 1;
        IF rounds > 10000 THEN
            RAISE EXCEPTION 'skiplock_reopen: more than 10000 generations of dependents';
        END IF;
        total := total + cardinality(ids);
        -- batches: the member is pending again
        UPDATE job_batches b
           SET pending = b.pending + x.n, dead = b.dead - x.dead, cancelled = b.cancelled - x.cancelled
          FROM (SELECT j.batch_id, count(*)::int AS n,
                       count(*) FILTER (WHERE o.old = 'dead')::int AS dead,
                       count(*) FILTER (WHERE o.old = 'failed')::int AS cancelled
                  FROM unnest(ids, olds) AS o(id, old) JOIN jobs j ON j.id = o.id AND j.id = ANY(ids)
                 WHERE j.batch_id IS NOT NULL AND o.old IN ('dead', 'failed')
                 GROUP BY j.batch_id) x
         WHERE b.id = x.batch_id;
        -- its failed edges re-open; children still waiting count it again
        PERFORM 1 FROM jobs c
         WHERE c.id = ANY (ARRAY(SELECT e.child FROM job_deps e WHERE e.parent = ANY(ids)
                                    AND e.parent_state IN ('dead', 'failed')))
         ORDER BY c.id FOR UPDATE;
        WITH opened AS (
            UPDATE job_deps e SET parent_state = NULL, settled_at = NULL
             WHERE e.parent = ANY(ids) AND e.parent_state IN ('dead', 'failed')
            RETURNING e.child
        ), per_child AS (
            SELECT child, count(*)::int AS n FROM opened GROUP BY child
        ), counted AS (
            UPDATE jobs j SET waiting_on = j.waiting_on + p.n
              FROM per_child p
             WHERE j.id = p.child AND j.id = ANY (ARRAY(SELECT child FROM per_child))
               AND j.status::text = 'waiting'  -- a primary-key probe per child (see skiplock_settle)
            RETURNING j.id
        ), revived AS (
            -- ended only because of a dependency, and no failed parent edge is left: wait again
            UPDATE jobs j
               -- (this statement's snapshot still shows the edges `opened` re-opens: they are counted
               -- from p.n and left out of the failed-edge test by their parent)
               SET status = 'waiting', finished_at = NULL,
                   waiting_on = p.n + (SELECT count(*) FROM job_deps e WHERE e.child = j.id AND e.parent_state IS NULL),
                   last_error = concat_ws(E'\n', 'dependency retried', j.last_error)
              FROM per_child p
             WHERE j.id = p.child AND j.id = ANY (ARRAY(SELECT child FROM per_child))
               AND j.status IN ('dead', 'failed') AND j.error_group = 'dependency failed'
               AND NOT EXISTS (SELECT 1 FROM job_deps e WHERE e.child = j.id AND e.parent_state IN ('dead', 'failed')
                                  AND e.parent <> ALL(ids))
            RETURNING j.id
        )
        SELECT coalesce(array_agg(r.id ORDER BY r.id), '{}') AS ids,
               coalesce(array_agg(o.status::text ORDER BY r.id), '{}') AS olds
          INTO nxt
          FROM revived r
          JOIN jobs o ON o.id = r.id;  -- the snapshot's row: its status before this statement
        ids := nxt.ids;
        olds := nxt.olds;
    END LOOP;
    RETURN total;
END $$;
