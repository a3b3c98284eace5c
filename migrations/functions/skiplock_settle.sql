-- skiplock_settle: part of the workflows (issue 33; first in 026_workflows.sql, whose text stays as it was
-- for databases that ran it). The current definition: edit it here (migrations/README.md).
-- The design: docs/explanation/workflows-design.md.
--
-- Called in the same statement as every transition into a final state (the ack batch, job.complete,
-- the reaper's dead, an operator's release and cancel). For the given jobs and their final states:
-- close their open edges, count the children down (releasing or ending them), count their batches
-- down (calling back once), and wake whoever waits. Children that end because of a failed parent
-- are settled in turn. Idempotent: only open edges are closed, and a batch calls back once.
-- Children and batches are locked in id order, so two concurrent settles cannot deadlock.
-- SET enable_seqscan = off (here and in the functions below that reach rows by key): job_deps may
-- have no statistics yet (autovacuum behind, or off), and with none the planner scanned all of it
-- for each edge (10,000 commit-time checks of a fan-in job took 71 s); every statement here has an
-- index that answers it.
--
-- writes jobs: yes, because a final parent releases its waiting dependents or ends them with it
CREATE OR REPLACE FUNCTION skiplock_settle(p_ids bigint[], p_states text[], p_batches bigint[], p_heads text[])
RETURNS int LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    ids bigint[] := p_ids;
    states text[] := p_states;
    batches bigint[] := p_batches;
    heads text[] := p_heads;
    ended record;
    c_ids bigint[];
    c_ns int[];
    c_bad bigint[];
    c_bad_states text[];
    c_bad_heads text[];
    released_queues text[] := '{}';
    c_queues text[];
    all_ok boolean;
    total int := 0;
    rounds int := 0;
BEGIN
    WHILE coalesce(cardinality(ids), 0) > 0 LOOP
        rounds := rounds + 1;
        IF rounds > 10000 THEN
            RAISE EXCEPTION 'skiplock_settle: more than 10000 generations of dependents';
        END IF;
        total := total + cardinality(ids);
        all_ok := NOT EXISTS (SELECT 1 FROM unnest(states) AS s WHERE s IS DISTINCT FROM 'succeeded');

        -- 1. close the open edges of these parents; per child: how many closed, the first failed parent.
        -- The edges first, the children after: closing an edge locks only that edge's row, which no
        -- other settle touches (each parent is finalised once), so the children's locks (step 2) are
        -- held for less of the statement - a fan-in child's row is what every ack of its parents
        -- waits for. (Before, the children were locked first, through a second walk of the edges.)
        IF all_ok THEN
            -- successes only (nearly every ack): no failed parent to pick out per child
            WITH closed AS (
                UPDATE job_deps e SET parent_state = 'succeeded', settled_at = now()
                 WHERE e.parent = ANY(ids) AND e.parent_state IS NULL
                RETURNING e.child
            )
            SELECT coalesce(array_agg(child ORDER BY child), '{}'), coalesce(array_agg(n ORDER BY child), '{}')
              INTO c_ids, c_ns
              FROM (SELECT child, count(*)::int AS n FROM closed GROUP BY child) per_child;
        ELSE
            WITH done AS (
                SELECT d.id, d.state, d.head FROM unnest(ids, states, heads) AS d(id, state, head)
            ), closed AS (
                UPDATE job_deps e SET parent_state = d.state::job_status, settled_at = now()
                  FROM done d
                 WHERE e.parent = d.id AND e.parent_state IS NULL
                RETURNING e.child, e.parent, d.state, d.head
            ), per_child AS (
                SELECT c.child, count(*)::int AS n,
                       (array_agg(c.parent ORDER BY c.parent) FILTER (WHERE c.state <> 'succeeded'))[1] AS bad_parent,
                       (array_agg(c.state ORDER BY c.parent) FILTER (WHERE c.state <> 'succeeded'))[1] AS bad_state,
                       (array_agg(c.head ORDER BY c.parent) FILTER (WHERE c.state <> 'succeeded'))[1] AS bad_head
                  FROM closed c GROUP BY c.child
            )
            SELECT coalesce(array_agg(child ORDER BY child), '{}'), coalesce(array_agg(n ORDER BY child), '{}'),
                   coalesce(array_agg(bad_parent ORDER BY child), '{}'), coalesce(array_agg(bad_state ORDER BY child), '{}'),
                   coalesce(array_agg(bad_head ORDER BY child), '{}')
              INTO c_ids, c_ns, c_bad, c_bad_states, c_bad_heads
              FROM per_child;
        END IF;

        -- 2. the children: locked in id order (no deadlock between two settles that finish different
        -- parents of the same children), then counted down, released or ended. One child needs no
        -- ordering. Every jobs row is reached as `id = ANY(array)`, a primary-key probe per child
        -- whatever the statistics say (a generic plan guessed 25 children and hashed them against a
        -- scan of jobs; tests/integration/test_workflow_plans.py).
        IF cardinality(c_ids) > 1 THEN
            PERFORM 1 FROM jobs c WHERE c.id = ANY(c_ids) ORDER BY c.id FOR UPDATE;
        END IF;

        -- From arrays: the planner cannot join them against a CTE it thinks holds 2 rows (a nested loop
        -- re-reading 2,000 CTE rows per child took 6 s for 2,000 children); an unnest drives one
        -- primary-key probe per child. status::text keeps jobs_waiting_idx out: walking it per child was
        -- the same quadratic cost. A child that stays waiting keeps its run_at: then no indexed column
        -- changes and its update is HOT (a fan-in child is counted down by every ack of its parents;
        -- with run_at moved each time, each of those updates added an entry to three of its indexes).
        IF cardinality(c_ids) = 0 THEN
            NULL;  -- no open edges (an ordinary job, once anything was ever linked): no child to touch
        ELSIF all_ok THEN
            WITH moved AS (
                UPDATE jobs j
                   SET waiting_on = greatest(j.waiting_on - p.n, 0),
                       status = CASE WHEN j.waiting_on - p.n <= 0 THEN 'queued' ELSE 'waiting' END::job_status,
                       run_at = CASE WHEN j.waiting_on - p.n <= 0 THEN greatest(j.run_at, now()) ELSE j.run_at END
                  FROM unnest(c_ids, c_ns) AS p(child, n)
                 WHERE j.id = p.child AND j.status::text = 'waiting'
                RETURNING j.queue, j.status
            )
            SELECT coalesce(array_agg(DISTINCT m.queue) FILTER (WHERE m.status = 'queued'), '{}')
              INTO c_queues FROM moved m;
            released_queues := released_queues || c_queues;
        ELSE
            WITH moved AS (
                UPDATE jobs j
                   SET waiting_on = greatest(j.waiting_on - p.n, 0),
                       status = CASE
                           WHEN p.bad_parent IS NOT NULL AND j.on_dependency_failure IS NULL
                               THEN (CASE WHEN p.bad_state = 'dead' THEN 'dead' ELSE 'failed' END)::job_status
                           WHEN j.waiting_on - p.n <= 0 THEN 'queued'::job_status
                           ELSE 'waiting'::job_status END,
                       finished_at = CASE WHEN p.bad_parent IS NOT NULL AND j.on_dependency_failure IS NULL
                                          THEN now() END,
                       run_at = CASE WHEN (p.bad_parent IS NULL OR j.on_dependency_failure IS NOT NULL)
                                          AND j.waiting_on - p.n <= 0
                                     THEN greatest(j.run_at, now()) ELSE j.run_at END,
                       last_error = CASE WHEN p.bad_parent IS NOT NULL AND j.on_dependency_failure IS NULL
                           THEN concat_ws(': ', 'dependency ' || p.bad_parent || ' '
                                          || (CASE WHEN p.bad_state = 'dead' THEN 'dead' ELSE 'cancelled' END),
                                          p.bad_head)
                           ELSE j.last_error END,
                       error_headline = CASE WHEN p.bad_parent IS NOT NULL AND j.on_dependency_failure IS NULL
                           THEN left(concat_ws(': ', 'dependency ' || p.bad_parent || ' '
                                          || (CASE WHEN p.bad_state = 'dead' THEN 'dead' ELSE 'cancelled' END),
                                          p.bad_head), 200)
                           ELSE j.error_headline END,
                       error_group = CASE WHEN p.bad_parent IS NOT NULL AND j.on_dependency_failure IS NULL
                           THEN 'dependency failed' ELSE j.error_group END
                  FROM unnest(c_ids, c_ns, c_bad, c_bad_states, c_bad_heads) AS p(child, n, bad_parent, bad_state, bad_head)
                 WHERE j.id = p.child AND j.status::text = 'waiting'
                RETURNING j.id, j.status::text AS status, j.queue, j.batch_id, j.error_headline
            )
            SELECT coalesce(array_agg(m.id ORDER BY m.id) FILTER (WHERE m.status IN ('dead', 'failed')), '{}') AS ids,
                   coalesce(array_agg(m.status ORDER BY m.id) FILTER (WHERE m.status IN ('dead', 'failed')), '{}') AS states,
                   coalesce(array_agg(m.batch_id ORDER BY m.id) FILTER (WHERE m.status IN ('dead', 'failed')), '{}') AS batches,
                   coalesce(array_agg(m.error_headline ORDER BY m.id) FILTER (WHERE m.status IN ('dead', 'failed')), '{}') AS heads,
                   coalesce(array_agg(DISTINCT m.queue) FILTER (WHERE m.status = 'queued'), '{}') AS queues
              INTO ended
              FROM moved m;
            released_queues := released_queues || ended.queues;
        END IF;

        -- batches: count members down, call back once when the last one is final
        IF EXISTS (SELECT 1 FROM unnest(batches) AS x WHERE x IS NOT NULL) THEN
            PERFORM skiplock_count_batch_members(ids, states, batches);
        END IF;

        -- whoever waits for these jobs (skiplock.wait); nobody, mostly: one probe of an empty index
        IF EXISTS (SELECT 1 FROM job_watchers) THEN
            PERFORM pg_notify('skiplock_done', w.job_id::text)
               FROM (SELECT DISTINCT job_id FROM job_watchers WHERE job_id = ANY(ids)) w;
        END IF;

        IF all_ok OR cardinality(c_ids) = 0 THEN
            EXIT;  -- no child ended: nothing to settle in turn
        END IF;
        ids := ended.ids;
        states := ended.states;
        batches := ended.batches;
        heads := ended.heads;
    END LOOP;

    PERFORM pg_notify('skiplock_jobs', q) FROM (SELECT DISTINCT unnest(released_queues) AS q) r;
    RETURN total;
END $$;
