-- The pruner's deletes of finished jobs past their retention (SKIPLOCK_HISTORY_MODE=keep, and dead/failed jobs).

-- name: prune_finished
-- Delete up to %(limit)s jobs of one final status that finished more than %(older_than)s seconds
-- ago, oldest first per queue. jobs_finished_idx is (status, queue, finished_at, id): a flat
-- "finished_at < cutoff" scan would walk every kept row of the queues before the expired ones,
-- so the recursive CTE hops from queue to queue (a loose index scan: one index probe each) and
-- the LATERAL reads only each queue's expired range. The literal IN list lets the planner prove
-- the partial index applies (a bound status alone would not). The limit keeps each statement's
-- locks small and short; SKIP LOCKED leaves rows an operator is retrying or purging right now
-- to the next pass. queued and running rows are outside the index and can never match.
WITH RECURSIVE queues(queue) AS (
    SELECT min(queue) FROM jobs
     WHERE status IN ('succeeded', 'failed', 'dead') AND status = %(status)s::job_status
    UNION ALL
    SELECT (SELECT min(j.queue) FROM jobs j
             WHERE j.status IN ('succeeded', 'failed', 'dead') AND j.status = %(status)s::job_status
               AND j.queue > q.queue)
      FROM queues q
     WHERE q.queue IS NOT NULL
), doomed AS (
    SELECT d.id
      FROM queues q
      CROSS JOIN LATERAL (
          SELECT j.id FROM jobs j
           WHERE j.status IN ('succeeded', 'failed', 'dead') AND j.status = %(status)s::job_status
             AND j.queue = q.queue AND j.finished_at < now() - make_interval(secs => %(older_than)s)
           ORDER BY j.finished_at
           LIMIT %(limit)s
             FOR UPDATE SKIP LOCKED
      ) d
     WHERE q.queue IS NOT NULL
     LIMIT %(limit)s
)
DELETE FROM jobs j
 USING doomed
 WHERE j.id = doomed.id AND j.status = %(status)s::job_status
RETURNING j.id
