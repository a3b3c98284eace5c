-- The @task options a job was enqueued without (jobs.task_options_unknown, migration 049): its producer
-- had neither the task module nor its queue's task_defaults row, as before any worker had started.
-- A worker of the queue fills them in from its task (worker/core/task_options.py). Bits: 1 max_attempts,
-- 2 version, 4 lock_key. Only jobs not yet running change: a running one is filled in once it is queued
-- again for its next attempt. Every statement reads jobs through jobs_task_options_unknown_idx.

-- name: fill_in
-- The fixed options of each of a worker's tasks, written into the jobs that lack them; the bit of a
-- lock_key computed from the payload stays set for fill_in_lock_keys. A NULL max_attempts (the task
-- declares none) keeps the producer's SKIPLOCK_MAX_ATTEMPTS.
UPDATE jobs j
   SET max_attempts = CASE WHEN j.task_options_unknown & 1 <> 0 THEN coalesce(t.ma, j.max_attempts)
                           ELSE j.max_attempts END,
       version = CASE WHEN j.task_options_unknown & 2 <> 0 THEN t.vn ELSE j.version END,
       lock_key = CASE WHEN j.task_options_unknown & 4 <> 0 AND NOT t.computed THEN t.lk ELSE j.lock_key END,
       task_options_unknown = CASE WHEN t.computed AND j.task_options_unknown & 4 <> 0 THEN 4::smallint END
  FROM unnest(%(queues)s::text[], %(max_attempts)s::int[], %(versions)s::int[], %(lock_keys)s::text[],
              %(computed)s::boolean[]) AS t(q, ma, vn, lk, computed)
 WHERE j.queue = t.q AND j.task_options_unknown IS NOT NULL AND j.status IN ('queued', 'waiting')
   AND j.task_options_unknown IS DISTINCT FROM (CASE WHEN t.computed THEN 4 END)::smallint

-- name: lacking_lock_key
-- A page of one queue's jobs whose lock_key the task computes from the payload, and which have none yet.
SELECT id, payload FROM jobs
 WHERE queue = %(queue)s AND task_options_unknown = 4 AND status IN ('queued', 'waiting')
 ORDER BY id
 LIMIT %(limit)s
   FOR UPDATE SKIP LOCKED

-- name: fill_in_lock_keys
-- The lock keys computed for a page of lacking_lock_key's jobs (NULL where the task's function failed).
UPDATE jobs j SET lock_key = k.lk, task_options_unknown = NULL
  FROM unnest(%(ids)s::bigint[], %(lock_keys)s::text[]) AS k(id, lk)
 WHERE j.id = k.id
