-- The workflow sweeper (services/workflow_sweeper.py) and the doctor's check: they repair what a
-- finalising statement that did not call skiplock_settle (a hand-written UPDATE, an old client) or a
-- crash between steps could leave, so no dependent and no batch waits forever.

-- name: stranded_edges
-- Open edges whose parent is already final, or gone, while the child still waits: a finalising
-- statement that did not call skiplock_settle (a hand-written UPDATE, an old client). Read through
-- jobs_waiting_idx and the edges' child index, never a scan of jobs.
SELECT e.parent, coalesce(p.status::text, r.state::text, 'succeeded') AS state,
       coalesce(p.error_headline, r.error) AS head
  FROM jobs c
  JOIN job_deps e ON e.child = c.id AND e.parent_state IS NULL
  LEFT JOIN jobs p ON p.id = e.parent
  LEFT JOIN job_results r ON r.job_id = e.parent
 WHERE c.status = 'waiting'
   AND (p.id IS NULL OR p.status IN ('succeeded', 'dead', 'failed'))
   AND c.created_at < now() - make_interval(secs => %(grace)s)
 LIMIT %(limit)s

-- name: miscounted_waiting
-- Waiting jobs whose counter disagrees with their open edges (recounted, then released at zero).
SELECT c.id, c.waiting_on, (SELECT count(*) FROM job_deps e WHERE e.child = c.id AND e.parent_state IS NULL) AS open
  FROM jobs c
 WHERE c.status = 'waiting' AND c.created_at < now() - make_interval(secs => %(grace)s)
   AND c.waiting_on <> (SELECT count(*) FROM job_deps e WHERE e.child = c.id AND e.parent_state IS NULL)
 LIMIT %(limit)s

-- name: recount_waiting
-- Recount the given waiting jobs' open edges; a job left with none is queued (run_at not in the past).
WITH fixed AS (
    UPDATE jobs c
       SET waiting_on = x.open,
           status = (CASE WHEN x.open = 0 THEN 'queued' ELSE 'waiting' END)::job_status,
           run_at = CASE WHEN x.open = 0 THEN greatest(c.run_at, now()) ELSE c.run_at END
      FROM (SELECT j.id, (SELECT count(*) FROM job_deps e WHERE e.child = j.id AND e.parent_state IS NULL)::int AS open
              FROM jobs j WHERE j.id = ANY(%(ids)s::bigint[]) AND j.status::text = 'waiting' FOR UPDATE OF j) x
     WHERE c.id = x.id
    RETURNING c.id, c.queue, c.status
)
SELECT id, queue, status::text FROM fixed

-- name: settle
-- Settle parents the normal path missed (stranded_edges' rows).
SELECT skiplock_settle(%(ids)s::bigint[], %(states)s::text[], %(batches)s::bigint[], %(heads)s::text[])

-- name: uncalled_batches
-- Batches that are done (sealed, nothing pending) but never called back.
SELECT id FROM job_batches WHERE called_back_at IS NULL AND sealed AND pending = 0 LIMIT %(limit)s

-- name: miscounted_batches
-- Sealed batches whose pending counter is above what their members' rows say (each counted through
-- jobs_batch_idx).
SELECT b.id, b.pending, m.pending AS counted
  FROM job_batches b
  CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE j.status IN ('waiting', 'queued', 'running')) AS pending
                        FROM jobs j WHERE j.batch_id = b.id) m
 WHERE b.called_back_at IS NULL AND b.sealed AND b.created_at < now() - make_interval(secs => %(grace)s)
   AND m.pending < b.pending
 LIMIT %(limit)s

-- name: recount_batch
-- A batch recounted from its members' rows: members whose rows are gone (deleted at success) are
-- the total less those counted, taken as succeeded; then the call back if that made it done.
WITH m AS (
    SELECT count(*) FILTER (WHERE status IN ('waiting', 'queued', 'running'))::int AS pending,
           count(*) FILTER (WHERE status = 'dead')::int AS dead,
           count(*) FILTER (WHERE status = 'failed')::int AS cancelled
      FROM jobs WHERE batch_id = %(batch)s
), fixed AS (
    UPDATE job_batches b
       SET pending = m.pending, dead = m.dead, cancelled = m.cancelled,
           succeeded = b.total - m.pending - m.dead - m.cancelled
      FROM m WHERE b.id = %(batch)s AND b.called_back_at IS NULL
    RETURNING b.id
)
SELECT skiplock_batch_call_back(id) FROM fixed

-- name: call_back
-- Call a batch back (enqueue its on_complete / on_success jobs) if it is done and has not yet.
SELECT skiplock_batch_call_back(%(batch)s)
