-- Rows this worker owns, addressed by id: heartbeat, progress, the ack (jobs_ack.sql), the attempt
-- history, snooze and release. They name their rows by id, a few hundred at most, and each row must be
-- found by a primary-key probe. Left to itself the planner does not always do that: statistics taken
-- while few jobs ran (a backlog just enqueued, autovacuum behind) say one row is running and owned by
-- this worker, so it walked all of jobs_running_idx, or scanned the table, or joined the batch against
-- a whole-index scan re-reading the batch per row. So the rows are looked up in a LATERAL subquery `f`
-- per id (OFFSET 0 keeps it from being flattened into a join, so each lookup is its own probe by id)
-- and the statement then touches exactly those row versions by ctid. `status::text` hides
-- jobs_running_idx's predicate from that lookup. The lookup is not locked: if another transaction (the
-- reaper, an operator) changes a row after it was read, the UPDATE/DELETE re-checks `ctid = f.ctid`
-- against the new version, which has moved, so the row is skipped - exactly what the fence would decide.
-- A statement that writes a run's result also fences on its attempt (x.attempts = v.attempt).

-- name: heartbeat
-- Extend the leases of this worker's running jobs; ids missing from the result lost their lease.
UPDATE jobs j
   SET lease_until = now() + make_interval(secs => v.lease)
  FROM unnest(%(ids)s::bigint[], %(leases)s::float8[]) AS v(id, lease)
       CROSS JOIN LATERAL (SELECT x.ctid FROM jobs x
                            WHERE x.id = v.id AND x.worker_id = %(worker_id)s AND x.status::text = 'running'
                           OFFSET 0) f
 WHERE j.ctid = f.ctid
RETURNING j.id

-- name: progress
-- job.progress(): the latest fraction and message of this worker's running jobs, fenced like the
-- heartbeat (same worker, still running), written beside it.
UPDATE jobs j
   SET progress = v.fraction, progress_message = v.message, progress_at = now()
  FROM unnest(%(ids)s::bigint[], %(fractions)s::float4[], %(messages)s::text[]) AS v(id, fraction, message)
       CROSS JOIN LATERAL (SELECT x.ctid FROM jobs x
                            WHERE x.id = v.id AND x.worker_id = %(worker_id)s AND x.status::text = 'running'
                           OFFSET 0) f
 WHERE j.ctid = f.ctid

-- name: cancel_requests
-- The cancel requests of a worker's running jobs made during their current run (read with each heartbeat).
SELECT id, cancel_requested_by FROM jobs
 WHERE id = ANY(%(ids)s) AND status = 'running' AND cancel_requested_at >= started_at

-- name: record_attempts
-- Append each failed run's error to its job's bounded history (state_changes.record_attempts): the last %(keep)s
-- failed runs, each error cut to %(chars)s characters, fenced like the ack (this worker, this run, running).
UPDATE jobs j
   SET attempt_errors = (
       SELECT jsonb_agg(e.value ORDER BY e.n)
         FROM jsonb_array_elements(
                  coalesce(j.attempt_errors, '[]'::jsonb)
                  || jsonb_build_array(jsonb_build_object(
                         'attempt', v.attempt, 'worker', %(worker_id)s::text, 'started', j.started_at, 'at', now(),
                         'duration_ms', round(v.duration::numeric, 1), 'error', left(v.error, %(chars)s))))
              WITH ORDINALITY AS e(value, n)
        WHERE e.n > jsonb_array_length(coalesce(j.attempt_errors, '[]'::jsonb)) + 1 - %(keep)s)
  FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(durations)s::float8[], %(errors)s::text[])
       AS v(id, attempt, duration, error)
       CROSS JOIN LATERAL (SELECT x.ctid FROM jobs x
                            WHERE x.id = v.id AND x.attempts = v.attempt AND x.worker_id = %(worker_id)s AND x.status::text = 'running'
                           OFFSET 0) f
 WHERE j.ctid = f.ctid

-- name: give_back
-- running -> queued with the claim's attempt given back, per row: a snooze (`raise Snooze(seconds)`:
-- queued %(delays)s later, its snooze counted), a graceful shutdown's release of this worker's unfinished
-- jobs (the interrupted run was the deploy, not the job), and a hand-off this worker never received (that
-- run never started). Fenced like the ack: this worker, still running, and, where the row's attempt is
-- given (a snooze: a result of that run), that attempt, so a late result of a reaped run never touches
-- the newer run. Returns the ids written, with their queues.
UPDATE jobs j
   SET status = 'queued',
       run_at = now() + make_interval(secs => v.delay),
       attempts = greatest(j.attempts - 1, 0),
       snooze_count = CASE WHEN v.snoozed THEN coalesce(j.snooze_count, 0) + 1 ELSE j.snooze_count END,
       worker_id = NULL,
       lease_until = NULL
  FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(delays)s::float8[], %(snoozed)s::bool[])
           AS v(id, attempt, delay, snoozed)
       CROSS JOIN LATERAL (SELECT x.ctid FROM jobs x
                            WHERE x.id = v.id AND (v.attempt IS NULL OR x.attempts = v.attempt)
                              AND x.worker_id = %(worker_id)s AND x.status::text = 'running'
                           OFFSET 0) f
 WHERE j.ctid = f.ctid
RETURNING j.id, j.queue

-- name: lost_handoffs
-- The jobs handed to this worker by the insert trigger that it never received (features/handoff.py):
-- running under its id for more than %(age)s seconds, yet not among the jobs it knows. give_back
-- returns them. Running jobs are few, and this runs only after a listener reconnect or at a stop.
SELECT j.id FROM jobs j
 WHERE j.status = 'running' AND j.worker_id = %(worker_id)s
   AND j.started_at < now() - make_interval(secs => %(age)s)
   AND NOT (j.id = ANY(%(known)s::bigint[]))
