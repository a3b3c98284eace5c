-- The claim: up to %(limit)s ready jobs from the given queues for one worker, in one statement, and
-- the limits it needs to know. Everything flow control decides happens here, in SQL, never in a loop
-- that claims a job it cannot run and puts it back:
-- - allowances/wanted: the queues to claim from, minus paused ones, each with the newest payload
--   version this worker knows and its allowance: %(limit)s, or for a limited queue what its concurrency
--   limit (running jobs counted now) and its token bucket leave. The queues the caller believes limited
--   (%(limited)s, its cache of queue_limits, read with limits_of) go through skiplock_limit_allowances(),
--   which locks their queue_limits rows and counts under that lock, in this one statement. A limited
--   queue it could not lock (another claim holds it), or one the caller did not name, is left out of
--   this claim: never claimed past its limit.
-- - head: per queue, a LATERAL walk of jobs_ready_idx in (priority DESC, run_at, id) order with SKIP
--   LOCKED, of the rows skiplock_claimable() passes (queued, due, of a payload version the worker knows:
--   a newer one is left for a newer worker).
--   A job with a lock_key is passed over while its key has a running job (a probe of
--   jobs_lock_key_running) or while another claim in flight holds the key's transaction-scoped
--   advisory lock (taken here: two concurrent claims skip each other).
-- - tenant_hops/by_tenant: skiplock_tenant_hops() hops from tenant to tenant over
--   jobs_tenant_ready_idx (starting after the worker's %(tenant_after)s, wrapping round, at most 256
--   of them) and by_tenant reads each tenant's first ready jobs, so a small tenant's jobs are
--   candidates even behind another tenant's 100,000. A queue without tenants costs one function call
--   and one empty index probe.
-- - picked: one job per lock_key (the best in order), each tenant's jobs ranked (`turn`), each queue's
--   allowance; then the best %(limit)s by (turn, priority DESC, run_at, id). Without tenants every job
--   has one partition, so `turn` follows the plain order exactly.
-- The CTEs are the optimisation fence that makes Postgres lock only rows it will update. The claimed
-- rows come back in that same order (the worker starts them in it): RETURNING alone follows the join's
-- order, which the planner may change with the statistics.
--
-- Three variants, each written out in full, differ only in what they return: claim (the payload as
-- jsonb and the JobContext columns), claim_payload_text and claim_lean_text. Each is sent squeezed
-- (worker/core/sql/__init__.py) and stays under psycopg's 4096-character parse cache.

-- name: claim
-- Claim ready jobs for one worker, each returned with its payload as jsonb and the JobContext columns.
WITH allowances AS MATERIALIZED (
    -- a one-time filter: a claim of unlimited queues only never calls the function
    SELECT a.queue, a.allow FROM skiplock_limit_allowances(%(limited)s::text[], %(limit)s::int) a
     WHERE cardinality(%(limited)s::text[]) > 0
), wanted AS MATERIALIZED (
    SELECT w.queue, w.lease, w.version, w.tenant_after, coalesce(a.allow, %(limit)s::int) AS allow
      FROM unnest(%(queues)s::text[], %(leases)s::float8[], %(versions)s::int[], %(tenant_after)s::text[])
           AS w(queue, lease, version, tenant_after)
      LEFT JOIN allowances a ON a.queue = w.queue
      LEFT JOIN queue_limits l ON l.queue = w.queue AND (l.concurrency IS NOT NULL OR l.rate IS NOT NULL)
     WHERE NOT EXISTS (SELECT 1 FROM paused_queues p WHERE p.queue = w.queue)
       AND (l.queue IS NULL OR a.queue IS NOT NULL)
), head AS (
    SELECT c.id, c.queue, c.priority, c.run_at, c.lock_key, c.tenant, wanted.lease, wanted.allow
      FROM wanted
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant
            FROM jobs j
           WHERE j.queue = wanted.queue
             -- queued, due, and a payload version this worker knows (inlined: migrations/functions/)
             AND skiplock_claimable(j.status, j.run_at, j.version, wanted.version)
             AND (j.lock_key IS NULL
                  OR (NOT EXISTS (SELECT 1 FROM jobs r
                                   WHERE r.lock_key = j.lock_key AND r.status = 'running' AND r.lock_key IS NOT NULL)
                      -- 1936419947 ('sklk'): the advisory lock namespace of lock keys
                      AND pg_try_advisory_xact_lock(1936419947, hashtext(j.lock_key))))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT wanted.allow
             FOR UPDATE SKIP LOCKED
      ) c
     WHERE wanted.allow > 0
), tenant_hops AS (
    SELECT w.queue, h.tenant
      FROM wanted w
      -- 256: the most tenants of one queue one claim looks at; the worker's cursor rotates past them
      CROSS JOIN LATERAL skiplock_tenant_hops(w.queue, w.tenant_after, 256) AS h(tenant)
     WHERE w.allow > 0
), tenant_counts AS (
    SELECT queue, count(*) AS tenants FROM tenant_hops GROUP BY queue
), by_tenant AS (
    SELECT c.id, c.queue, c.priority, c.run_at, c.lock_key, c.tenant, w.lease, w.allow
      FROM tenant_hops h
      JOIN wanted w ON w.queue = h.queue
      JOIN tenant_counts n ON n.queue = h.queue
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant
            FROM jobs j
           WHERE j.queue = h.queue AND j.tenant = h.tenant
             AND skiplock_claimable(j.status, j.run_at, j.version, w.version)
             AND (j.lock_key IS NULL
                  OR (NOT EXISTS (SELECT 1 FROM jobs r
                                   WHERE r.lock_key = j.lock_key AND r.status = 'running' AND r.lock_key IS NOT NULL)
                      -- 1936419947 ('sklk'): the advisory lock namespace of lock keys
                      AND pg_try_advisory_xact_lock(1936419947, hashtext(j.lock_key))))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT ceil(w.allow::float8 / n.tenants)::int
             FOR UPDATE SKIP LOCKED
      ) c
), candidates AS (
    SELECT * FROM head
    UNION
    SELECT * FROM by_tenant
), one_per_key AS (
    SELECT c.*, row_number() OVER (PARTITION BY c.lock_key ORDER BY c.priority DESC, c.run_at, c.id) AS key_rank
      FROM candidates c
), ranked AS (
    SELECT k.*, row_number() OVER (PARTITION BY k.tenant ORDER BY k.priority DESC, k.run_at, k.id) AS turn
      FROM one_per_key k
     WHERE k.lock_key IS NULL OR k.key_rank = 1
), picked AS (
    -- Two branches, each behind a one-time filter, so only one runs. Without tenant jobs and
    -- without keyed candidates (the common case) the plain order is the answer: none of the
    -- window functions' sorts, a large part of a plain claim's time.
    (SELECT h.id, h.lease, 1::bigint AS turn
       FROM head h
      WHERE NOT EXISTS (SELECT 1 FROM by_tenant) AND NOT EXISTS (SELECT 1 FROM head k WHERE k.lock_key IS NOT NULL)
      ORDER BY h.priority DESC, h.run_at, h.id
      LIMIT %(limit)s)
    UNION ALL
    (SELECT q.id, q.lease, q.turn
       FROM (SELECT r.*, row_number() OVER (PARTITION BY r.queue ORDER BY r.turn, r.priority DESC, r.run_at, r.id)
                         AS queue_rank
               FROM ranked r) q
      WHERE q.queue_rank <= q.allow
        AND (EXISTS (SELECT 1 FROM by_tenant) OR EXISTS (SELECT 1 FROM head k WHERE k.lock_key IS NOT NULL))
      ORDER BY q.turn, q.priority DESC, q.run_at, q.id
      LIMIT %(limit)s)
), claimed AS (
    UPDATE jobs j
       SET status = 'running',
           attempts = j.attempts + 1,
           started_at = now(),
           lease_until = now() + make_interval(secs => picked.lease),
           worker_id = %(worker_id)s
      FROM picked
     WHERE j.id = picked.id
       -- the same ids once more, as an array: jobs is then reached by its primary key for exactly
       -- these ids whatever the statistics say. Planned while jobs looked empty (a vacuum had
       -- just found the queue empty), the join alone was run as a walk of all of jobs_pkey with
       -- `picked` re-read per row (tests/integration/test_claim_plan.py)
       AND j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING picked.turn, j.id, j.queue, j.payload AS payload, j.attempts, j.max_attempts,
              j.version, j.tenant, j.priority, j.run_at, j.created_at, j.started_at, j.unique_key
), spent AS (
    -- rate-limited queues' token buckets: refilled for the time since, less what was claimed now
    UPDATE queue_limits l
       SET tokens = least(l.burst, l.tokens + l.rate * extract(epoch FROM now() - l.refilled_at)) - c.n,
           refilled_at = now()
      FROM (SELECT queue, count(*) AS n FROM claimed GROUP BY queue) c
     WHERE l.queue = c.queue AND l.rate IS NOT NULL AND l.queue IN (SELECT queue FROM allowances)
)
SELECT id, queue, payload, attempts, max_attempts, version, tenant, priority, run_at, created_at, started_at, unique_key
  FROM claimed
 ORDER BY turn, priority DESC, run_at, id

-- name: claim_payload_text
-- The same claim with each payload as its JSON text, for the worker: it decodes in the handler
-- thread, off the claim loop that every job of the process waits behind.
WITH allowances AS MATERIALIZED (
    -- a one-time filter: a claim of unlimited queues only never calls the function
    SELECT a.queue, a.allow FROM skiplock_limit_allowances(%(limited)s::text[], %(limit)s::int) a
     WHERE cardinality(%(limited)s::text[]) > 0
), wanted AS MATERIALIZED (
    SELECT w.queue, w.lease, w.version, w.tenant_after, coalesce(a.allow, %(limit)s::int) AS allow
      FROM unnest(%(queues)s::text[], %(leases)s::float8[], %(versions)s::int[], %(tenant_after)s::text[])
           AS w(queue, lease, version, tenant_after)
      LEFT JOIN allowances a ON a.queue = w.queue
      LEFT JOIN queue_limits l ON l.queue = w.queue AND (l.concurrency IS NOT NULL OR l.rate IS NOT NULL)
     WHERE NOT EXISTS (SELECT 1 FROM paused_queues p WHERE p.queue = w.queue)
       AND (l.queue IS NULL OR a.queue IS NOT NULL)
), head AS (
    SELECT c.id, c.queue, c.priority, c.run_at, c.lock_key, c.tenant, wanted.lease, wanted.allow
      FROM wanted
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant
            FROM jobs j
           WHERE j.queue = wanted.queue
             -- queued, due, and a payload version this worker knows (inlined: migrations/functions/)
             AND skiplock_claimable(j.status, j.run_at, j.version, wanted.version)
             AND (j.lock_key IS NULL
                  OR (NOT EXISTS (SELECT 1 FROM jobs r
                                   WHERE r.lock_key = j.lock_key AND r.status = 'running' AND r.lock_key IS NOT NULL)
                      -- 1936419947 ('sklk'): the advisory lock namespace of lock keys
                      AND pg_try_advisory_xact_lock(1936419947, hashtext(j.lock_key))))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT wanted.allow
             FOR UPDATE SKIP LOCKED
      ) c
     WHERE wanted.allow > 0
), tenant_hops AS (
    SELECT w.queue, h.tenant
      FROM wanted w
      -- 256: the most tenants of one queue one claim looks at; the worker's cursor rotates past them
      CROSS JOIN LATERAL skiplock_tenant_hops(w.queue, w.tenant_after, 256) AS h(tenant)
     WHERE w.allow > 0
), tenant_counts AS (
    SELECT queue, count(*) AS tenants FROM tenant_hops GROUP BY queue
), by_tenant AS (
    SELECT c.id, c.queue, c.priority, c.run_at, c.lock_key, c.tenant, w.lease, w.allow
      FROM tenant_hops h
      JOIN wanted w ON w.queue = h.queue
      JOIN tenant_counts n ON n.queue = h.queue
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant
            FROM jobs j
           WHERE j.queue = h.queue AND j.tenant = h.tenant
             AND skiplock_claimable(j.status, j.run_at, j.version, w.version)
             AND (j.lock_key IS NULL
                  OR (NOT EXISTS (SELECT 1 FROM jobs r
                                   WHERE r.lock_key = j.lock_key AND r.status = 'running' AND r.lock_key IS NOT NULL)
                      -- 1936419947 ('sklk'): the advisory lock namespace of lock keys
                      AND pg_try_advisory_xact_lock(1936419947, hashtext(j.lock_key))))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT ceil(w.allow::float8 / n.tenants)::int
             FOR UPDATE SKIP LOCKED
      ) c
), candidates AS (
    SELECT * FROM head
    UNION
    SELECT * FROM by_tenant
), one_per_key AS (
    SELECT c.*, row_number() OVER (PARTITION BY c.lock_key ORDER BY c.priority DESC, c.run_at, c.id) AS key_rank
      FROM candidates c
), ranked AS (
    SELECT k.*, row_number() OVER (PARTITION BY k.tenant ORDER BY k.priority DESC, k.run_at, k.id) AS turn
      FROM one_per_key k
     WHERE k.lock_key IS NULL OR k.key_rank = 1
), picked AS (
    -- Two branches, each behind a one-time filter, so only one runs. Without tenant jobs and
    -- without keyed candidates (the common case) the plain order is the answer: none of the
    -- window functions' sorts, a large part of a plain claim's time.
    (SELECT h.id, h.lease, 1::bigint AS turn
       FROM head h
      WHERE NOT EXISTS (SELECT 1 FROM by_tenant) AND NOT EXISTS (SELECT 1 FROM head k WHERE k.lock_key IS NOT NULL)
      ORDER BY h.priority DESC, h.run_at, h.id
      LIMIT %(limit)s)
    UNION ALL
    (SELECT q.id, q.lease, q.turn
       FROM (SELECT r.*, row_number() OVER (PARTITION BY r.queue ORDER BY r.turn, r.priority DESC, r.run_at, r.id)
                         AS queue_rank
               FROM ranked r) q
      WHERE q.queue_rank <= q.allow
        AND (EXISTS (SELECT 1 FROM by_tenant) OR EXISTS (SELECT 1 FROM head k WHERE k.lock_key IS NOT NULL))
      ORDER BY q.turn, q.priority DESC, q.run_at, q.id
      LIMIT %(limit)s)
), claimed AS (
    UPDATE jobs j
       SET status = 'running',
           attempts = j.attempts + 1,
           started_at = now(),
           lease_until = now() + make_interval(secs => picked.lease),
           worker_id = %(worker_id)s
      FROM picked
     WHERE j.id = picked.id
       -- the same ids once more, as an array: jobs is then reached by its primary key for exactly
       -- these ids whatever the statistics say. Planned while jobs looked empty (a vacuum had
       -- just found the queue empty), the join alone was run as a walk of all of jobs_pkey with
       -- `picked` re-read per row (tests/integration/test_claim_plan.py)
       AND j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING picked.turn, j.id, j.queue, j.payload::text AS payload, j.attempts, j.max_attempts,
              j.version, j.tenant, j.priority, j.run_at, j.created_at, j.started_at, j.unique_key
), spent AS (
    -- rate-limited queues' token buckets: refilled for the time since, less what was claimed now
    UPDATE queue_limits l
       SET tokens = least(l.burst, l.tokens + l.rate * extract(epoch FROM now() - l.refilled_at)) - c.n,
           refilled_at = now()
      FROM (SELECT queue, count(*) AS n FROM claimed GROUP BY queue) c
     WHERE l.queue = c.queue AND l.rate IS NOT NULL AND l.queue IN (SELECT queue FROM allowances)
)
SELECT id, queue, payload, attempts, max_attempts, version, tenant, priority, run_at, created_at, started_at, unique_key
  FROM claimed
 ORDER BY turn, priority DESC, run_at, id

-- name: claim_lean_text
-- The claim with each payload as its JSON text and without the JobContext columns, for a worker whose
-- handlers never ask for `job`: decoding four timestamps per row was half of the claim's client CPU.
WITH allowances AS MATERIALIZED (
    -- a one-time filter: a claim of unlimited queues only never calls the function
    SELECT a.queue, a.allow FROM skiplock_limit_allowances(%(limited)s::text[], %(limit)s::int) a
     WHERE cardinality(%(limited)s::text[]) > 0
), wanted AS MATERIALIZED (
    SELECT w.queue, w.lease, w.version, w.tenant_after, coalesce(a.allow, %(limit)s::int) AS allow
      FROM unnest(%(queues)s::text[], %(leases)s::float8[], %(versions)s::int[], %(tenant_after)s::text[])
           AS w(queue, lease, version, tenant_after)
      LEFT JOIN allowances a ON a.queue = w.queue
      LEFT JOIN queue_limits l ON l.queue = w.queue AND (l.concurrency IS NOT NULL OR l.rate IS NOT NULL)
     WHERE NOT EXISTS (SELECT 1 FROM paused_queues p WHERE p.queue = w.queue)
       AND (l.queue IS NULL OR a.queue IS NOT NULL)
), head AS (
    SELECT c.id, c.queue, c.priority, c.run_at, c.lock_key, c.tenant, wanted.lease, wanted.allow
      FROM wanted
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant
            FROM jobs j
           WHERE j.queue = wanted.queue
             -- queued, due, and a payload version this worker knows (inlined: migrations/functions/)
             AND skiplock_claimable(j.status, j.run_at, j.version, wanted.version)
             AND (j.lock_key IS NULL
                  OR (NOT EXISTS (SELECT 1 FROM jobs r
                                   WHERE r.lock_key = j.lock_key AND r.status = 'running' AND r.lock_key IS NOT NULL)
                      -- 1936419947 ('sklk'): the advisory lock namespace of lock keys
                      AND pg_try_advisory_xact_lock(1936419947, hashtext(j.lock_key))))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT wanted.allow
             FOR UPDATE SKIP LOCKED
      ) c
     WHERE wanted.allow > 0
), tenant_hops AS (
    SELECT w.queue, h.tenant
      FROM wanted w
      -- 256: the most tenants of one queue one claim looks at; the worker's cursor rotates past them
      CROSS JOIN LATERAL skiplock_tenant_hops(w.queue, w.tenant_after, 256) AS h(tenant)
     WHERE w.allow > 0
), tenant_counts AS (
    SELECT queue, count(*) AS tenants FROM tenant_hops GROUP BY queue
), by_tenant AS (
    SELECT c.id, c.queue, c.priority, c.run_at, c.lock_key, c.tenant, w.lease, w.allow
      FROM tenant_hops h
      JOIN wanted w ON w.queue = h.queue
      JOIN tenant_counts n ON n.queue = h.queue
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant
            FROM jobs j
           WHERE j.queue = h.queue AND j.tenant = h.tenant
             AND skiplock_claimable(j.status, j.run_at, j.version, w.version)
             AND (j.lock_key IS NULL
                  OR (NOT EXISTS (SELECT 1 FROM jobs r
                                   WHERE r.lock_key = j.lock_key AND r.status = 'running' AND r.lock_key IS NOT NULL)
                      -- 1936419947 ('sklk'): the advisory lock namespace of lock keys
                      AND pg_try_advisory_xact_lock(1936419947, hashtext(j.lock_key))))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT ceil(w.allow::float8 / n.tenants)::int
             FOR UPDATE SKIP LOCKED
      ) c
), candidates AS (
    SELECT * FROM head
    UNION
    SELECT * FROM by_tenant
), one_per_key AS (
    SELECT c.*, row_number() OVER (PARTITION BY c.lock_key ORDER BY c.priority DESC, c.run_at, c.id) AS key_rank
      FROM candidates c
), ranked AS (
    SELECT k.*, row_number() OVER (PARTITION BY k.tenant ORDER BY k.priority DESC, k.run_at, k.id) AS turn
      FROM one_per_key k
     WHERE k.lock_key IS NULL OR k.key_rank = 1
), picked AS (
    -- Two branches, each behind a one-time filter, so only one runs. Without tenant jobs and
    -- without keyed candidates (the common case) the plain order is the answer: none of the
    -- window functions' sorts, a large part of a plain claim's time.
    (SELECT h.id, h.lease, 1::bigint AS turn
       FROM head h
      WHERE NOT EXISTS (SELECT 1 FROM by_tenant) AND NOT EXISTS (SELECT 1 FROM head k WHERE k.lock_key IS NOT NULL)
      ORDER BY h.priority DESC, h.run_at, h.id
      LIMIT %(limit)s)
    UNION ALL
    (SELECT q.id, q.lease, q.turn
       FROM (SELECT r.*, row_number() OVER (PARTITION BY r.queue ORDER BY r.turn, r.priority DESC, r.run_at, r.id)
                         AS queue_rank
               FROM ranked r) q
      WHERE q.queue_rank <= q.allow
        AND (EXISTS (SELECT 1 FROM by_tenant) OR EXISTS (SELECT 1 FROM head k WHERE k.lock_key IS NOT NULL))
      ORDER BY q.turn, q.priority DESC, q.run_at, q.id
      LIMIT %(limit)s)
), claimed AS (
    UPDATE jobs j
       SET status = 'running',
           attempts = j.attempts + 1,
           started_at = now(),
           lease_until = now() + make_interval(secs => picked.lease),
           worker_id = %(worker_id)s
      FROM picked
     WHERE j.id = picked.id
       -- the same ids once more, as an array: jobs is then reached by its primary key for exactly
       -- these ids whatever the statistics say. Planned while jobs looked empty (a vacuum had
       -- just found the queue empty), the join alone was run as a walk of all of jobs_pkey with
       -- `picked` re-read per row (tests/integration/test_claim_plan.py)
       AND j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING picked.turn, j.id, j.queue, j.payload::text AS payload, j.attempts, j.max_attempts,
              j.version, j.tenant, j.priority, j.run_at, j.created_at, j.started_at, j.unique_key
), spent AS (
    -- rate-limited queues' token buckets: refilled for the time since, less what was claimed now
    UPDATE queue_limits l
       SET tokens = least(l.burst, l.tokens + l.rate * extract(epoch FROM now() - l.refilled_at)) - c.n,
           refilled_at = now()
      FROM (SELECT queue, count(*) AS n FROM claimed GROUP BY queue) c
     WHERE l.queue = c.queue AND l.rate IS NOT NULL AND l.queue IN (SELECT queue FROM allowances)
)
SELECT id, queue, payload, attempts, max_attempts, version, tenant
  FROM claimed
 ORDER BY turn, priority DESC, run_at, id

-- name: limits_of
-- The limits of the given queues: the worker's cache of which queues the claim must lock (%(limited)s).
SELECT queue, concurrency, rate, burst FROM queue_limits
 WHERE queue = ANY(%(queues)s::text[]) AND (concurrency IS NOT NULL OR rate IS NOT NULL)
