-- Workflows: linked enqueues (parents and batches), batches, stored results, where a job stands, and
-- wait()'s watchers. The transitions that settle dependents and batches run in PL/pgSQL
-- (migrations/functions/: skiplock_settle, skiplock_reopen, skiplock_batch_call_back), called by the
-- statements that end jobs (jobs_ack.sql, jobs_operator.sql).

-- name: unknown_parents
-- Parent ids that are not jobs and never were (past the id sequence, or not positive): an
-- EnqueueError before anything is written, so the caller's transaction stays usable.
SELECT coalesce(array_agg(p ORDER BY p), '{}') FROM unnest(%(parents)s::bigint[]) AS p
 WHERE p IS NULL OR p <= 0 OR (p > (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM jobs_id_seq)
                                AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = p))

-- name: enqueue_linked
-- Enqueue jobs that are linked: with parents (waiting until they are final) and/or as members of a
-- batch (counted into it in this statement, and only while it has not called back). One statement,
-- so an autocommit connection cannot keep half of it. Ids are drawn first so that each row's edges
-- can name it. skiplock_check_parents() raises on an unknown parent (the SQL path's guard; Python
-- callers check first with unknown_parents) and sets the skiplock_linked flag. Each edge is checked
-- once more at COMMIT by the job_deps_check trigger: a parent already final releases or ends the
-- child there. Parents are given per job as array literals ('{1,2}'), unique keys are refused before.
WITH seq AS MATERIALIZED (SELECT pg_get_serial_sequence('jobs', 'id')::regclass AS s),
v AS MATERIALIZED (
    SELECT nextval(seq.s) AS id, u.q, u.p, u.pr, u.ra, u.ma, u.lk, u.tn, u.vn, u.wt, u.tu,
           -- a job without parents (a batch member) skips the per-row subquery: NULL, not '{}'
           CASE WHEN u.pa IS NULL THEN '{}'::bigint[]
                ELSE ARRAY(SELECT DISTINCT x FROM unnest(u.pa::bigint[]) AS x) END AS parents, u.pol, u.ord
      FROM seq, unnest(%(queues)s::text[], %(payloads)s::text[], %(priorities)s::int[], %(run_ats)s::timestamptz[],
                       %(max_attempts)s::int[], %(lock_keys)s::text[], %(tenants)s::text[], %(versions)s::int[],
                       %(weights)s::int[], %(unknown)s::smallint[], %(parents)s::text[], %(policies)s::text[])
                WITH ORDINALITY AS u(q, p, pr, ra, ma, lk, tn, vn, wt, tu, pa, pol, ord)
     ORDER BY u.ord
), checked AS MATERIALIZED (
    SELECT skiplock_check_parents(ARRAY(SELECT DISTINCT x FROM v, unnest(v.parents) AS x)) AS root
), joined AS MATERIALIZED (
    UPDATE job_batches b SET total = b.total + (SELECT count(*) FROM v), pending = b.pending + (SELECT count(*) FROM v)
     WHERE b.id = %(batch)s::bigint AND b.called_back_at IS NULL
    RETURNING b.id
), ins AS (
    INSERT INTO jobs (id, queue, payload, priority, run_at, max_attempts, lock_key, tenant, version, weight,
                      task_options_unknown, status, waiting_on, on_dependency_failure, workflow_id, batch_id)
    SELECT v.id, v.q, v.p::jsonb, v.pr, coalesce(v.ra, now()), v.ma, v.lk, v.tn, v.vn, v.wt, v.tu,
           (CASE WHEN cardinality(v.parents) > 0 THEN 'waiting' ELSE 'queued' END)::job_status,
           CASE WHEN cardinality(v.parents) > 0 THEN cardinality(v.parents) END,
           v.pol,
           CASE WHEN cardinality(v.parents) > 0
                THEN coalesce((SELECT coalesce(pj.workflow_id, pj.id) FROM jobs pj WHERE pj.id = v.parents[1]),
                              v.parents[1]) END,
           (SELECT id FROM joined)
      FROM v, checked
     WHERE %(batch)s::bigint IS NULL OR EXISTS (SELECT 1 FROM joined)
     ORDER BY v.ord
    RETURNING id
), edges AS (
    -- each edge keeps both jobs' queues (migration 048), so the console names them after their rows are gone
    INSERT INTO job_deps (parent, child, parent_queue, child_queue)
    SELECT x, v.id, (SELECT pj.queue FROM jobs pj WHERE pj.id = x), v.q
      FROM v CROSS JOIN LATERAL unnest(v.parents) AS x
     WHERE EXISTS (SELECT 1 FROM ins)
)
SELECT id FROM ins ORDER BY id

-- name: batch_open
-- A new batch, open until its enqueuing block ends (sealed). Sets the skiplock_linked flag.
WITH flag AS (SELECT setval('skiplock_linked', 1, true) WHERE pg_sequence_last_value('skiplock_linked') IS NULL)
INSERT INTO job_batches (on_complete, on_success)
SELECT %(on_complete)s::jsonb, %(on_success)s::jsonb FROM (SELECT count(*) FROM flag) f
RETURNING id

-- name: batch_seal
-- The enqueuing block ended: a batch with nothing pending (empty, or all members final already)
-- calls back now; otherwise its last member's settle does.
WITH sealed AS (UPDATE job_batches SET sealed = true WHERE id = %(batch)s RETURNING id)
SELECT skiplock_batch_call_back(id) FROM sealed

-- name: batch_is_open
-- Whether a batch can still take members (it exists and has not called back).
SELECT called_back_at IS NULL FROM job_batches WHERE id = %(batch)s

-- name: batch_of_job
-- A batch as its members and callbacks see it (job.batch), found from any of its jobs.
SELECT b.id, b.total, b.pending, b.succeeded, b.dead, b.cancelled, b.sealed, b.called_back_at,
       b.complete_job_id, b.success_job_id
  FROM job_batches b
 WHERE b.id = (SELECT batch_id FROM jobs WHERE id = %(job)s)
    OR b.complete_job_id = %(job)s OR b.success_job_id = %(job)s
 LIMIT 1

-- name: batch_by_id
-- One batch by id (the console's batch page and skiplock.batch_status).
SELECT b.id, b.total, b.pending, b.succeeded, b.dead, b.cancelled, b.sealed, b.called_back_at,
       b.complete_job_id, b.success_job_id
  FROM job_batches b WHERE b.id = %(batch)s

-- name: parents_of
-- A job's parents: id, the edge's final state (NULL while open) and the stored result (job.parent_results).
SELECT e.parent, e.parent_state::text, r.result
  FROM job_deps e LEFT JOIN job_results r ON r.job_id = e.parent
 WHERE e.child = %(job)s
 ORDER BY e.parent

-- name: job_status
-- Where a job stands, for skiplock.status/result/wait: its row if it has one, its stored result,
-- and whether its id was ever issued (a success in history mode delete leaves no row).
SELECT j.status::text, j.last_error, j.error_headline, j.attempts, j.max_attempts, j.waiting_on,
       j.batch_id, j.workflow_id, j.progress, j.progress_message, j.queue,
       r.state::text, r.result, r.error,
       (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM jobs_id_seq) >= %(job)s AS issued,
       EXISTS (SELECT 1 FROM jobs_history h WHERE h.id = %(job)s) AS archived
  FROM (SELECT %(job)s::bigint AS id) x
  LEFT JOIN jobs j ON j.id = x.id
  LEFT JOIN job_results r ON r.job_id = x.id

-- name: watch
-- skiplock.wait(): register interest in a job (skiplock_settle NOTIFYs only watched jobs). Sets the
-- skiplock_linked flag.
WITH flag AS (SELECT setval('skiplock_linked', 1, true) WHERE pg_sequence_last_value('skiplock_linked') IS NULL)
INSERT INTO job_watchers (job_id) SELECT %(job)s FROM (SELECT count(*) FROM flag) f

-- name: unwatch
-- skiplock.wait() is done: forget one registration of interest in the job.
DELETE FROM job_watchers WHERE ctid = (SELECT ctid FROM job_watchers WHERE job_id = %(job)s LIMIT 1)

-- name: prune_watchers
-- Watchers left by a process that died while waiting.
DELETE FROM job_watchers WHERE since < now() - make_interval(secs => %(older_than)s)

-- name: prune_results
-- Stored results past their retention (SKIPLOCK_RESULT_TTL), a bounded batch at a time.
DELETE FROM job_results WHERE job_id = ANY (ARRAY(
    SELECT job_id FROM job_results WHERE finished_at < now() - make_interval(secs => %(older_than)s)
     ORDER BY finished_at LIMIT %(limit)s))

-- name: workflow_unstarted
-- The jobs of a workflow that are not running (queued, waiting or parked): cancelling the rest of it ends
-- them failed, through cancel_queued (so their batches and dependents are settled too).
SELECT id FROM jobs WHERE (workflow_id = %(workflow)s OR id = %(workflow)s) AND status IN ('queued', 'waiting', 'parked')

-- name: workflow_running
-- The running jobs of a workflow: cancelling the rest of it asks each to stop.
SELECT id FROM jobs WHERE (workflow_id = %(workflow)s OR id = %(workflow)s) AND status = 'running'

-- name: workflow_dead_root_causes
-- The dead or failed jobs of a workflow that failed on their own (not ended by a parent): retrying a
-- workflow retries these, and their dependents come back with them.
SELECT id FROM jobs
 WHERE (workflow_id = %(workflow)s OR id = %(workflow)s) AND status IN ('dead', 'failed')
   AND error_group IS DISTINCT FROM 'dependency failed'
