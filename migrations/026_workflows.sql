-- 026: workflows - dependencies, batches, results, progress (issue 33). Safe to re-run.
-- The design, and why each piece is where it is: docs/explanation/workflows-design.md.

-- ---- columns of jobs ------------------------------------------------------------------------------
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS waiting_on int;                 -- waiting: parents not yet final
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS on_dependency_failure text;     -- NULL: end with the parent; 'run'
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS workflow_id bigint;             -- the root job of its DAG
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS batch_id bigint;                -- member of job_batches(id)
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS progress real;                  -- 0..1, from job.progress()
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS progress_message text;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS progress_at timestamptz;

DO $$
BEGIN
    ALTER TABLE jobs ADD CONSTRAINT jobs_waiting_counts
        CHECK (status <> 'waiting' OR waiting_on IS NOT NULL);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$
BEGIN
    ALTER TABLE jobs ADD CONSTRAINT jobs_dependency_policy
        CHECK (on_dependency_failure IS NULL OR on_dependency_failure = 'run');
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$
BEGIN
    ALTER TABLE jobs ADD CONSTRAINT jobs_progress_range CHECK (progress IS NULL OR progress BETWEEN 0 AND 1);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

-- The sweeper and the console find waiting jobs here, never in a scan of jobs.
CREATE INDEX IF NOT EXISTS jobs_waiting_idx ON jobs (id) WHERE status = 'waiting';
CREATE INDEX IF NOT EXISTS jobs_workflow_idx ON jobs (workflow_id, id) WHERE workflow_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_batch_idx ON jobs (batch_id, status) WHERE batch_id IS NOT NULL;

-- ---- edges -------------------------------------------------------------------------------------------
-- One row per (parent, child). parent_state is NULL while the edge is open, then the parent's final
-- state: the child can read it after the parent's row is gone (history mode delete).
CREATE TABLE IF NOT EXISTS job_deps (
    parent       bigint     NOT NULL,
    child        bigint     NOT NULL,
    parent_state job_status,
    settled_at   timestamptz,
    PRIMARY KEY (parent, child),
    CONSTRAINT job_deps_not_self CHECK (parent <> child),
    CONSTRAINT job_deps_final_state CHECK (parent_state IS NULL OR parent_state IN ('succeeded', 'failed', 'dead'))
);
CREATE INDEX IF NOT EXISTS job_deps_child_idx ON job_deps (child);
-- Each edge is written twice (inserted open, then closed with its parent's state): room on its page
-- lets the close be a HOT update, which touches neither index.
ALTER TABLE job_deps SET (fillfactor = 50);

-- ---- batches -----------------------------------------------------------------------------------------
CREATE TABLE IF NOT EXISTS job_batches (
    id             bigserial   PRIMARY KEY,
    total          int         NOT NULL DEFAULT 0,  -- members ever added
    pending        int         NOT NULL DEFAULT 0,  -- members not in a final state
    succeeded      int         NOT NULL DEFAULT 0,
    dead           int         NOT NULL DEFAULT 0,
    cancelled      int         NOT NULL DEFAULT 0,  -- members that ended 'failed' (cancelled or discarded)
    sealed         boolean     NOT NULL DEFAULT false,  -- the enqueuing block ended: zero pending means done
    on_complete    jsonb,                           -- {"queue": ..., "payload": ...}: runs once all are final
    on_success     jsonb,                           -- the same, only when every member succeeded
    complete_job_id bigint,
    success_job_id bigint,
    called_back_at timestamptz,                     -- set once, with the callbacks' insert: exactly once
    created_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_batches_counts CHECK (pending >= 0 AND pending + succeeded + dead + cancelled = total)
);
CREATE INDEX IF NOT EXISTS job_batches_open_idx ON job_batches (id) WHERE called_back_at IS NULL;
CREATE INDEX IF NOT EXISTS job_batches_complete_job_idx ON job_batches (complete_job_id)
    WHERE complete_job_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS job_batches_success_job_idx ON job_batches (success_job_id)
    WHERE success_job_id IS NOT NULL;

-- ---- results -----------------------------------------------------------------------------------------
-- A handler's return value, written by the ack in the same statement as the success; outlives the
-- job's row. A purge leaves a tombstone (state dead/failed, result NULL) so that wait() and a late
-- dependent still learn how the job ended.
CREATE TABLE IF NOT EXISTS job_results (
    job_id      bigint      PRIMARY KEY,
    state       job_status  NOT NULL,
    result      jsonb,
    error       text,
    finished_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS job_results_finished_idx ON job_results (finished_at);

-- skiplock.wait(): who waits for which job. The settle function NOTIFYs only these ids.
CREATE TABLE IF NOT EXISTS job_watchers (
    job_id bigint      NOT NULL,
    since  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS job_watchers_job_idx ON job_watchers (job_id);

-- The flag "jobs have been linked here" (an edge, a batch or a watcher). Clear: finalising
-- statements skip skiplock_settle() entirely. It is set before the linking transaction commits and
-- never cleared (see the design page). Anyone may read and set it, as with skiplock_waiting.
CREATE SEQUENCE IF NOT EXISTS skiplock_linked MINVALUE 0 START 0;
GRANT SELECT, UPDATE ON SEQUENCE skiplock_linked TO PUBLIC;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM job_deps) OR EXISTS (SELECT 1 FROM job_batches) THEN
        PERFORM setval('skiplock_linked', 1, true);
    END IF;
END $$;

-- ---- the one rule: settle finished jobs --------------------------------------------------------------
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
    total int := 0;
    rounds int := 0;
BEGIN
    WHILE coalesce(cardinality(ids), 0) > 0 LOOP
        rounds := rounds + 1;
        IF rounds > 10000 THEN
            RAISE EXCEPTION 'skiplock_settle: more than 10000 generations of dependents';
        END IF;
        total := total + cardinality(ids);

        -- children: lock in id order, then count down / release / end them. Every jobs row is reached
        -- as `id = ANY(ARRAY(...))`, a primary-key probe per child whatever the statistics say (a
        -- generic plan guessed 25 children and hashed them against a scan of jobs;
        -- tests/integration/test_workflow_plans.py)
        PERFORM 1 FROM jobs c
         WHERE c.id = ANY (ARRAY(SELECT e.child FROM job_deps e WHERE e.parent = ANY(ids) AND e.parent_state IS NULL))
         ORDER BY c.id FOR UPDATE;
        -- 1. close the open edges of these parents; per child: how many closed, the first failed parent
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

        -- 2. the children, from arrays: the planner cannot join them against a CTE it thinks holds
        -- 2 rows (a nested loop re-reading 2,000 CTE rows per child took 6 s for 2,000 children); an
        -- unnest drives one primary-key probe per child. status::text keeps jobs_waiting_idx out:
        -- walking it per child was the same quadratic cost.
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
                   run_at = CASE WHEN p.bad_parent IS NULL OR j.on_dependency_failure IS NOT NULL
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

        -- batches: count members down, call back once when the last one is final
        PERFORM skiplock_count_batch_members(ids, states, batches);

        -- whoever waits for these jobs (skiplock.wait)
        PERFORM pg_notify('skiplock_done', w.job_id::text)
           FROM (SELECT DISTINCT job_id FROM job_watchers WHERE job_id = ANY(ids)) w;

        ids := ended.ids;
        states := ended.states;
        batches := ended.batches;
        heads := ended.heads;
    END LOOP;

    PERFORM pg_notify('skiplock_jobs', q) FROM (SELECT DISTINCT unnest(released_queues) AS q) r;
    RETURN total;
END $$;

-- Members that reached a final state, counted into their batches; the batch whose last member this
-- was (and whose enqueuing block has ended) calls back: exactly once, under the batch row's lock.
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

-- Call a batch back if it is done: sealed, nothing pending, not called back yet. The one place that
-- inserts callbacks (the settle above, the seal at the end of the enqueuing block, the sweeper).
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
        INSERT INTO jobs (queue, payload) VALUES (b.on_complete->>'queue', coalesce(b.on_complete->'payload', 'null'))
        RETURNING id INTO complete_id;
    END IF;
    IF b.on_success IS NOT NULL AND b.dead = 0 AND b.cancelled = 0 THEN
        INSERT INTO jobs (queue, payload) VALUES (b.on_success->>'queue', coalesce(b.on_success->'payload', 'null'))
        RETURNING id INTO success_id;
    END IF;
    UPDATE job_batches SET called_back_at = now(), complete_job_id = complete_id, success_job_id = success_id
     WHERE id = p_batch;
    RETURN true;
END $$;

-- ---- retry: re-open what a failed job had settled ----------------------------------------------------
-- Called after an operator's retry moved `p_ids` from dead/failed back to queued (p_old_states: what
-- they were). A retried job that has parents is re-evaluated against them (it waits for the open
-- ones, or ends again at once when a parent it needs stays failed); its own settled edges re-open,
-- so children still waiting count it again and children that ended only because of it wait again
-- (transitively); its batch counts it as pending again (a batch that already called back never
-- calls back twice).
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

-- A job with parents that was just put back to queued by a retry: it waits for its open parents,
-- or ends at once when a parent it needs ended badly (retry that parent instead).
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

-- ---- enqueue: parents checked, edges checked again at the child's commit ----------------------------
-- The workflow a child joins (its first parent's, else that parent itself), after checking that every
-- parent is a job that exists or existed. A parent id past the id sequence can only be a mistake, or
-- the child itself or a later job: either could close a cycle. Sets the linked flag.
CREATE OR REPLACE FUNCTION skiplock_check_parents(p_parents bigint[]) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    last_issued bigint;
    unknown bigint[];
    root bigint;
BEGIN
    IF coalesce(cardinality(p_parents), 0) = 0 THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM %s',
                   pg_get_serial_sequence('jobs', 'id')) INTO last_issued;
    SELECT array_agg(p ORDER BY p) INTO unknown
      FROM unnest(p_parents) AS p
     WHERE p IS NULL OR p <= 0 OR (p > last_issued AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = p));
    IF unknown IS NOT NULL THEN
        RAISE EXCEPTION 'unknown parent job id(s): %', array_to_string(unknown, ', ', 'NULL')
              USING ERRCODE = 'foreign_key_violation', HINT = 'skiplock_unknown_parent';
    END IF;
    SELECT coalesce(j.workflow_id, j.id) INTO root FROM jobs j WHERE j.id = p_parents[1];
    PERFORM setval('skiplock_linked', 1, true) WHERE pg_sequence_last_value('skiplock_linked') IS NULL;
    RETURN coalesce(root, p_parents[1]);
END $$;

-- At the child's COMMIT, each new edge looks at its parent once more, under FOR SHARE. A parent that
-- is final (or gone) now is settled here; one that is not cannot finish before this commit (its ack
-- waits for the lock), and its settle, whose queries take fresh snapshots, then sees this edge.
CREATE OR REPLACE FUNCTION skiplock_check_edge() RETURNS trigger
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    st text;
    head text;
BEGIN
    -- (an edge settled already, earlier in this transaction, is left alone by skiplock_settle itself:
    -- it closes only edges still open)
    SELECT j.status::text, j.error_headline INTO st, head FROM jobs j WHERE j.id = NEW.parent FOR SHARE;
    IF NOT FOUND THEN
        -- gone: a stored result or a purge's tombstone says how it ended; else history mode delete
        -- deleted it at its success (or it moved to jobs_history, also a success)
        SELECT r.state::text, r.error INTO st, head FROM job_results r WHERE r.job_id = NEW.parent;
        st := coalesce(st, 'succeeded');
    END IF;
    IF st IN ('succeeded', 'dead', 'failed') THEN
        PERFORM skiplock_settle(ARRAY[NEW.parent], ARRAY[st], ARRAY[NULL::bigint], ARRAY[head]);
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS job_deps_check ON job_deps;
CREATE CONSTRAINT TRIGGER job_deps_check AFTER INSERT ON job_deps
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION skiplock_check_edge();

-- The SQL-only producer's enqueue of a dependent job (see the workflows guide): one call, one job,
-- the same rules as enqueue(depends_on=...). Returns the new job's id.
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
    INSERT INTO job_deps (parent, child) SELECT p, new_id FROM unnest(parents) AS p;
    RETURN new_id;
END $$;
