-- Producers: the INSERTs that put jobs in the queue. The NOTIFY that wakes workers comes from the
-- statement trigger on jobs, not from here.
--
-- enqueue(unique_key=k, on_conflict=...) when a job with that key is still in flight (queued or running):
-- each variant is one INSERT ... ON CONFLICT, so two producers racing on one key leave one job (the unique
-- index arbitrates; a read-then-write would race).
-- - ignore: nothing changes, no row returned (enqueue returns None).
-- - bump: the queued job's run_at becomes the later of the two (a debounce); its id is returned. A running
--   job is left alone: no row.
-- - replace: the queued job takes the new payload, its version and run_at; its id is returned. A running
--   job is left alone: no row.
-- Each variant has a `_traced` twin that also stores the producer's trace context.

-- name: enqueue_plain
-- Insert one job without a unique_key: a plain INSERT. ON CONFLICT would cost a speculative insertion
-- even when the key is NULL and can never conflict, on the one-job-per-transaction path.
INSERT INTO jobs (queue, payload, priority, run_at, max_attempts, lock_key, tenant, version, weight, task_options_unknown)
VALUES (%(queue)s, %(payload)s::jsonb, %(priority)s, coalesce(%(run_at)s, now()), %(max_attempts)s, %(lock_key)s, %(tenant)s, %(version)s, %(weight)s, %(task_options_unknown)s::smallint)
RETURNING id

-- name: enqueue_plain_traced
-- enqueue_plain, also storing the producer's trace context.
INSERT INTO jobs (queue, payload, priority, run_at, max_attempts, lock_key, tenant, version, weight, task_options_unknown, trace_context)
VALUES (%(queue)s, %(payload)s::jsonb, %(priority)s, coalesce(%(run_at)s, now()), %(max_attempts)s, %(lock_key)s, %(tenant)s, %(version)s, %(weight)s, %(task_options_unknown)s::smallint, %(trace_context)s::jsonb)
RETURNING id

-- name: enqueue_unique_ignore
-- Insert one job with a unique_key; a key in flight collapses the insert (no row returned).
INSERT INTO jobs (queue, payload, priority, run_at, max_attempts, lock_key, tenant, version, weight, task_options_unknown, unique_key)
VALUES (%(queue)s, %(payload)s::jsonb, %(priority)s, coalesce(%(run_at)s, now()), %(max_attempts)s, %(lock_key)s, %(tenant)s, %(version)s, %(weight)s, %(task_options_unknown)s::smallint, %(unique_key)s)
ON CONFLICT (unique_key) WHERE status IN ('queued', 'running') DO NOTHING
RETURNING id

-- name: enqueue_unique_ignore_traced
-- enqueue_unique_ignore, also storing the producer's trace context.
INSERT INTO jobs (queue, payload, priority, run_at, max_attempts, lock_key, tenant, version, weight, task_options_unknown, unique_key, trace_context)
VALUES (%(queue)s, %(payload)s::jsonb, %(priority)s, coalesce(%(run_at)s, now()), %(max_attempts)s, %(lock_key)s, %(tenant)s, %(version)s, %(weight)s, %(task_options_unknown)s::smallint, %(unique_key)s, %(trace_context)s::jsonb)
ON CONFLICT (unique_key) WHERE status IN ('queued', 'running') DO NOTHING
RETURNING id

-- name: enqueue_unique_bump
-- Insert one job with a unique_key; a queued job with the key takes the later run_at (its id returned).
INSERT INTO jobs (queue, payload, priority, run_at, max_attempts, lock_key, tenant, version, weight, task_options_unknown, unique_key)
VALUES (%(queue)s, %(payload)s::jsonb, %(priority)s, coalesce(%(run_at)s, now()), %(max_attempts)s, %(lock_key)s, %(tenant)s, %(version)s, %(weight)s, %(task_options_unknown)s::smallint, %(unique_key)s)
ON CONFLICT (unique_key) WHERE status IN ('queued', 'running') DO UPDATE SET run_at = greatest(jobs.run_at, EXCLUDED.run_at) WHERE jobs.status = 'queued'
RETURNING id

-- name: enqueue_unique_bump_traced
-- enqueue_unique_bump, also storing the producer's trace context.
INSERT INTO jobs (queue, payload, priority, run_at, max_attempts, lock_key, tenant, version, weight, task_options_unknown, unique_key, trace_context)
VALUES (%(queue)s, %(payload)s::jsonb, %(priority)s, coalesce(%(run_at)s, now()), %(max_attempts)s, %(lock_key)s, %(tenant)s, %(version)s, %(weight)s, %(task_options_unknown)s::smallint, %(unique_key)s, %(trace_context)s::jsonb)
ON CONFLICT (unique_key) WHERE status IN ('queued', 'running') DO UPDATE SET run_at = greatest(jobs.run_at, EXCLUDED.run_at) WHERE jobs.status = 'queued'
RETURNING id

-- name: enqueue_unique_replace
-- Insert one job with a unique_key; a queued job with the key takes the new payload, version and run_at (its id returned).
INSERT INTO jobs (queue, payload, priority, run_at, max_attempts, lock_key, tenant, version, weight, task_options_unknown, unique_key)
VALUES (%(queue)s, %(payload)s::jsonb, %(priority)s, coalesce(%(run_at)s, now()), %(max_attempts)s, %(lock_key)s, %(tenant)s, %(version)s, %(weight)s, %(task_options_unknown)s::smallint, %(unique_key)s)
ON CONFLICT (unique_key) WHERE status IN ('queued', 'running') DO UPDATE SET payload = EXCLUDED.payload, version = EXCLUDED.version, run_at = EXCLUDED.run_at WHERE jobs.status = 'queued'
RETURNING id

-- name: enqueue_unique_replace_traced
-- enqueue_unique_replace, also storing the producer's trace context.
INSERT INTO jobs (queue, payload, priority, run_at, max_attempts, lock_key, tenant, version, weight, task_options_unknown, unique_key, trace_context)
VALUES (%(queue)s, %(payload)s::jsonb, %(priority)s, coalesce(%(run_at)s, now()), %(max_attempts)s, %(lock_key)s, %(tenant)s, %(version)s, %(weight)s, %(task_options_unknown)s::smallint, %(unique_key)s, %(trace_context)s::jsonb)
ON CONFLICT (unique_key) WHERE status IN ('queued', 'running') DO UPDATE SET payload = EXCLUDED.payload, version = EXCLUDED.version, run_at = EXCLUDED.run_at WHERE jobs.status = 'queued'
RETURNING id

-- name: enqueue_many
-- Insert many jobs in one statement from parallel arrays; collapsed unique keys return no row.
-- WITH ORDINALITY keeps input order so callers can map returned ids back to their inputs.
INSERT INTO jobs (queue, payload, priority, run_at, unique_key, max_attempts, lock_key, tenant, version, weight, task_options_unknown)
SELECT q, p::jsonb, pr, coalesce(ra, now()), uk, ma, lk, tn, vn, wt, tu
  FROM unnest(%(queues)s::text[], %(payloads)s::text[], %(priorities)s::int[],
              %(run_ats)s::timestamptz[], %(unique_keys)s::text[], %(max_attempts)s::int[],
              %(lock_keys)s::text[], %(tenants)s::text[], %(versions)s::int[], %(weights)s::int[], %(unknown)s::smallint[])
       WITH ORDINALITY AS v(q, p, pr, ra, uk, ma, lk, tn, vn, wt, tu, ord)
 ORDER BY ord
ON CONFLICT (unique_key) WHERE status IN ('queued', 'running') DO NOTHING
RETURNING id

-- name: reserve_job_ids
-- enqueue_many's COPY path for big batches of plain jobs: ids reserved first (COPY returns
-- none), then every row streamed in one COPY; run_at, status and the rest take their defaults.
-- The sequence is looked up once (MATERIALIZED): written inline, pg_get_serial_sequence ran per
-- row and took most of this statement's time. One array, one row.
WITH seq AS MATERIALIZED (SELECT pg_get_serial_sequence('jobs', 'id')::regclass AS s)
SELECT array_agg(nextval(seq.s)) FROM seq, generate_series(1, %(n)s)

-- name: copy_jobs
-- The COPY of enqueue_many's big batches of plain jobs, with the ids reserve_job_ids gave them.
COPY jobs (id, queue, payload, priority, max_attempts, version, weight, task_options_unknown) FROM STDIN

-- name: sql_producer_insert
-- The documented plain-SQL producer's INSERT (README "Enqueueing from any language"): the floor
-- that enqueue() is measured against.
INSERT INTO jobs (queue, payload) VALUES (%(queue)s, %(payload)s::jsonb)
