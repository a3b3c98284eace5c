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
--   advisory lock (taken here: two concurrent claims skip each other); skiplock_key_free() does both.
-- - tenant_hops/by_tenant: skiplock_tenant_hops() hops from tenant to tenant over
--   jobs_tenant_ready_idx (starting after the worker's %(tenant_after)s, wrapping round, at most 256
--   of them) and by_tenant reads each tenant's first ready jobs, so a small tenant's jobs are
--   candidates even behind another tenant's 100,000. A queue without tenants costs one function call
--   and one empty index probe.
-- - picked: one job per lock_key (the best in order), each tenant's jobs ranked (`turn`), each queue's
--   allowance; then the best %(limit)s by (turn, priority DESC, run_at, id). Without tenants every job
--   has one partition, so `turn` follows the plain order exactly.
- weights and per-tenant limits (migration 043): a job counts its `weight` toward its queue's limits,
--   up to the queue's weight_cap, its smallest limit (a job heavier than that runs alone, not never). `allow` is how
--   many jobs to read, `budget` the weight the queue may start (skiplock_limit_allowances, given no
--   bound of its own). caps: skiplock_tenant_allowances(), called on the queues this claim locked, says
--   what each tenant that holds some of a per-tenant limit may still start (others: tenant_cap). picked
--   keeps each tenant's running sum of weight within its allowance, then each queue's within its budget,
--   so a tenant at its limit is passed over and the next tenants' jobs fill the same claim. spent takes
--   the claimed weight from the queue's token bucket and its tenants' (skiplock_spend_tokens).
--   The limited queue's row lock that serializes its claims is what makes the per-tenant counts exact.
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
    SELECT a.queue, a.allow FROM skiplock_limit_allowances(%(limited)s::text[], NULL) a
     WHERE cardinality(%(limited)s::text[]) > 0
), wanted AS MATERIALIZED (
    -- allow: how many jobs to read; budget: the weight it may start; wcap: the most one job counts
    -- (queue_limits.weight_cap, 1 where nothing limits); tenant_cap: a tenant's allowance while it holds nothing
    SELECT w.queue, w.lease, w.version, w.tenant_after, least(a.allow, %(limit)s::int) AS allow,
           coalesce(a.allow, %(limit)s::int) AS budget, coalesce(l.weight_cap, 1) AS wcap, l.tenant_cap
      FROM unnest(%(queues)s::text[], %(leases)s::float8[], %(versions)s::int[], %(tenant_after)s::text[])
           AS w(queue, lease, version, tenant_after)
      LEFT JOIN allowances a ON a.queue = w.queue
      LEFT JOIN queue_limits l ON l.queue = w.queue AND l.limited
     WHERE NOT EXISTS (SELECT 1 FROM paused_queues p WHERE p.queue = w.queue)
       AND (l.queue IS NULL OR a.queue IS NOT NULL)
), head AS (
    SELECT c.*, wanted.lease, wanted.budget, wanted.tenant_cap
      FROM wanted
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant, least(j.weight, wanted.wcap) AS weight
            FROM jobs j
           WHERE j.queue = wanted.queue
             -- queued, due, and a payload version this worker knows (inlined: migrations/functions/)
             AND skiplock_claimable(j.status, j.run_at, j.version, wanted.version)
             -- a keyed job only while its key has no running job and no other claim holds it
             AND (j.lock_key IS NULL OR skiplock_key_free(j.lock_key))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT wanted.allow
             FOR UPDATE SKIP LOCKED
      ) c
     WHERE wanted.allow > 0
), tenant_hops AS (
    -- tenants: how many the walk found in the queue, each of whom gets an equal share of the claim
    SELECT w.queue, h.tenant, count(*) OVER (PARTITION BY w.queue) AS tenants
      FROM wanted w
      -- 256: the most tenants of one queue one claim looks at; the worker's cursor rotates past them
      CROSS JOIN LATERAL skiplock_tenant_hops(w.queue, w.tenant_after, 256) AS h(tenant)
     WHERE w.allow > 0
), by_tenant AS (
    SELECT c.*, w.lease, w.budget, w.tenant_cap
      FROM tenant_hops h
      JOIN wanted w ON w.queue = h.queue
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant, least(j.weight, w.wcap) AS weight
            FROM jobs j
           WHERE j.queue = h.queue AND j.tenant = h.tenant
             AND skiplock_claimable(j.status, j.run_at, j.version, w.version)
             -- a keyed job only while its key has no running job and no other claim holds it
             AND (j.lock_key IS NULL OR skiplock_key_free(j.lock_key))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT ceil(w.allow::float8 / h.tenants)::int
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
    -- turn: the job's place among its tenant's; tenant_used: the weight of its tenant up to it
    SELECT k.*, row_number() OVER t AS turn, sum(k.weight) OVER t AS tenant_used
      FROM one_per_key k
     WHERE k.lock_key IS NULL OR k.key_rank = 1
    WINDOW t AS (PARTITION BY k.queue, k.tenant ORDER BY k.priority DESC, k.run_at, k.id)
), caps AS MATERIALIZED (
    -- the per-tenant allowances of the limited queues this claim locked (after the locks, like theirs)
    SELECT * FROM skiplock_tenant_allowances(ARRAY(SELECT queue FROM allowances))
     WHERE cardinality(%(limited)s::text[]) > 0
), plain AS (
    -- whether the plain order is the answer (see picked); computed once, read by both branches
    SELECT NOT EXISTS (SELECT 1 FROM by_tenant)
           AND NOT EXISTS (SELECT 1 FROM head k WHERE k.lock_key IS NOT NULL OR k.weight > 1)
           AS yes
), picked AS (
    -- Two branches, each behind a one-time filter, so only one runs. Without tenant jobs, keyed
    -- candidates or weights that count (the common case) the plain order is the answer: none of the
    -- window functions' sorts, a large part of a plain claim's time. The other keeps each tenant
    -- within its allowance, then each queue within its budget: a tenant at its limit is passed
    -- over, and the next tenants' jobs fill the claim.
    (SELECT h.id, h.lease, 1::bigint AS turn
       FROM head h
      WHERE (SELECT yes FROM plain)
      ORDER BY h.priority DESC, h.run_at, h.id
      LIMIT %(limit)s)
    UNION ALL
    (SELECT q.id, q.lease, q.turn
       FROM (SELECT r.*, sum(r.weight) OVER (PARTITION BY r.queue ORDER BY r.turn, r.priority DESC, r.run_at, r.id)
                         AS used
               FROM ranked r
               LEFT JOIN caps c ON c.queue = r.queue AND c.tenant = r.tenant
              WHERE r.tenant IS NULL OR r.tenant_used <= coalesce(c.allow, r.tenant_cap, r.tenant_used)) q
      WHERE q.used <= q.budget AND NOT (SELECT yes FROM plain)
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
              j.version, j.tenant, j.priority, j.run_at, j.created_at, j.started_at, j.unique_key, j.weight
), spent AS (
    -- rate-limited queues' token buckets, the queue's and its tenants': refilled for the time since,
    -- less the weight claimed now
    UPDATE queue_limits l
       SET (tokens, tenant_tokens) = (SELECT * FROM skiplock_spend_tokens(l, c.tenants, c.weights)),
           refilled_at = now()
      FROM (SELECT queue, array_agg(tenant) AS tenants, array_agg(weight) AS weights FROM claimed GROUP BY queue) c
     WHERE l.queue = c.queue AND (l.rate IS NOT NULL OR l.tenant_rate IS NOT NULL)
       AND l.queue IN (SELECT queue FROM allowances)
)
SELECT id, queue, payload, attempts, max_attempts, version, tenant, priority, run_at, created_at, started_at, unique_key
  FROM claimed
 ORDER BY turn, priority DESC, run_at, id

-- name: claim_payload_text
-- The same claim with each payload as its JSON text, for the worker: it decodes in the handler
-- thread, off the claim loop that every job of the process waits behind.
WITH allowances AS MATERIALIZED (
    -- a one-time filter: a claim of unlimited queues only never calls the function
    SELECT a.queue, a.allow FROM skiplock_limit_allowances(%(limited)s::text[], NULL) a
     WHERE cardinality(%(limited)s::text[]) > 0
), wanted AS MATERIALIZED (
    -- allow: how many jobs to read; budget: the weight it may start; wcap: the most one job counts
    -- (queue_limits.weight_cap, 1 where nothing limits); tenant_cap: a tenant's allowance while it holds nothing
    SELECT w.queue, w.lease, w.version, w.tenant_after, least(a.allow, %(limit)s::int) AS allow,
           coalesce(a.allow, %(limit)s::int) AS budget, coalesce(l.weight_cap, 1) AS wcap, l.tenant_cap
      FROM unnest(%(queues)s::text[], %(leases)s::float8[], %(versions)s::int[], %(tenant_after)s::text[])
           AS w(queue, lease, version, tenant_after)
      LEFT JOIN allowances a ON a.queue = w.queue
      LEFT JOIN queue_limits l ON l.queue = w.queue AND l.limited
     WHERE NOT EXISTS (SELECT 1 FROM paused_queues p WHERE p.queue = w.queue)
       AND (l.queue IS NULL OR a.queue IS NOT NULL)
), head AS (
    SELECT c.*, wanted.lease, wanted.budget, wanted.tenant_cap
      FROM wanted
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant, least(j.weight, wanted.wcap) AS weight
            FROM jobs j
           WHERE j.queue = wanted.queue
             -- queued, due, and a payload version this worker knows (inlined: migrations/functions/)
             AND skiplock_claimable(j.status, j.run_at, j.version, wanted.version)
             -- a keyed job only while its key has no running job and no other claim holds it
             AND (j.lock_key IS NULL OR skiplock_key_free(j.lock_key))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT wanted.allow
             FOR UPDATE SKIP LOCKED
      ) c
     WHERE wanted.allow > 0
), tenant_hops AS (
    -- tenants: how many the walk found in the queue, each of whom gets an equal share of the claim
    SELECT w.queue, h.tenant, count(*) OVER (PARTITION BY w.queue) AS tenants
      FROM wanted w
      -- 256: the most tenants of one queue one claim looks at; the worker's cursor rotates past them
      CROSS JOIN LATERAL skiplock_tenant_hops(w.queue, w.tenant_after, 256) AS h(tenant)
     WHERE w.allow > 0
), by_tenant AS (
    SELECT c.*, w.lease, w.budget, w.tenant_cap
      FROM tenant_hops h
      JOIN wanted w ON w.queue = h.queue
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant, least(j.weight, w.wcap) AS weight
            FROM jobs j
           WHERE j.queue = h.queue AND j.tenant = h.tenant
             AND skiplock_claimable(j.status, j.run_at, j.version, w.version)
             -- a keyed job only while its key has no running job and no other claim holds it
             AND (j.lock_key IS NULL OR skiplock_key_free(j.lock_key))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT ceil(w.allow::float8 / h.tenants)::int
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
    -- turn: the job's place among its tenant's; tenant_used: the weight of its tenant up to it
    SELECT k.*, row_number() OVER t AS turn, sum(k.weight) OVER t AS tenant_used
      FROM one_per_key k
     WHERE k.lock_key IS NULL OR k.key_rank = 1
    WINDOW t AS (PARTITION BY k.queue, k.tenant ORDER BY k.priority DESC, k.run_at, k.id)
), caps AS MATERIALIZED (
    -- the per-tenant allowances of the limited queues this claim locked (after the locks, like theirs)
    SELECT * FROM skiplock_tenant_allowances(ARRAY(SELECT queue FROM allowances))
     WHERE cardinality(%(limited)s::text[]) > 0
), plain AS (
    -- whether the plain order is the answer (see picked); computed once, read by both branches
    SELECT NOT EXISTS (SELECT 1 FROM by_tenant)
           AND NOT EXISTS (SELECT 1 FROM head k WHERE k.lock_key IS NOT NULL OR k.weight > 1)
           AS yes
), picked AS (
    -- Two branches, each behind a one-time filter, so only one runs. Without tenant jobs, keyed
    -- candidates or weights that count (the common case) the plain order is the answer: none of the
    -- window functions' sorts, a large part of a plain claim's time. The other keeps each tenant
    -- within its allowance, then each queue within its budget: a tenant at its limit is passed
    -- over, and the next tenants' jobs fill the claim.
    (SELECT h.id, h.lease, 1::bigint AS turn
       FROM head h
      WHERE (SELECT yes FROM plain)
      ORDER BY h.priority DESC, h.run_at, h.id
      LIMIT %(limit)s)
    UNION ALL
    (SELECT q.id, q.lease, q.turn
       FROM (SELECT r.*, sum(r.weight) OVER (PARTITION BY r.queue ORDER BY r.turn, r.priority DESC, r.run_at, r.id)
                         AS used
               FROM ranked r
               LEFT JOIN caps c ON c.queue = r.queue AND c.tenant = r.tenant
              WHERE r.tenant IS NULL OR r.tenant_used <= coalesce(c.allow, r.tenant_cap, r.tenant_used)) q
      WHERE q.used <= q.budget AND NOT (SELECT yes FROM plain)
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
              j.version, j.tenant, j.priority, j.run_at, j.created_at, j.started_at, j.unique_key, j.weight
), spent AS (
    -- rate-limited queues' token buckets, the queue's and its tenants': refilled for the time since,
    -- less the weight claimed now
    UPDATE queue_limits l
       SET (tokens, tenant_tokens) = (SELECT * FROM skiplock_spend_tokens(l, c.tenants, c.weights)),
           refilled_at = now()
      FROM (SELECT queue, array_agg(tenant) AS tenants, array_agg(weight) AS weights FROM claimed GROUP BY queue) c
     WHERE l.queue = c.queue AND (l.rate IS NOT NULL OR l.tenant_rate IS NOT NULL)
       AND l.queue IN (SELECT queue FROM allowances)
)
SELECT id, queue, payload, attempts, max_attempts, version, tenant, priority, run_at, created_at, started_at, unique_key
  FROM claimed
 ORDER BY turn, priority DESC, run_at, id

-- name: claim_lean_text
-- The claim with each payload as its JSON text and without the JobContext columns, for a worker whose
-- handlers never ask for `job`: decoding four timestamps per row was half of the claim's client CPU.
WITH allowances AS MATERIALIZED (
    -- a one-time filter: a claim of unlimited queues only never calls the function
    SELECT a.queue, a.allow FROM skiplock_limit_allowances(%(limited)s::text[], NULL) a
     WHERE cardinality(%(limited)s::text[]) > 0
), wanted AS MATERIALIZED (
    -- allow: how many jobs to read; budget: the weight it may start; wcap: the most one job counts
    -- (queue_limits.weight_cap, 1 where nothing limits); tenant_cap: a tenant's allowance while it holds nothing
    SELECT w.queue, w.lease, w.version, w.tenant_after, least(a.allow, %(limit)s::int) AS allow,
           coalesce(a.allow, %(limit)s::int) AS budget, coalesce(l.weight_cap, 1) AS wcap, l.tenant_cap
      FROM unnest(%(queues)s::text[], %(leases)s::float8[], %(versions)s::int[], %(tenant_after)s::text[])
           AS w(queue, lease, version, tenant_after)
      LEFT JOIN allowances a ON a.queue = w.queue
      LEFT JOIN queue_limits l ON l.queue = w.queue AND l.limited
     WHERE NOT EXISTS (SELECT 1 FROM paused_queues p WHERE p.queue = w.queue)
       AND (l.queue IS NULL OR a.queue IS NOT NULL)
), head AS (
    SELECT c.*, wanted.lease, wanted.budget, wanted.tenant_cap
      FROM wanted
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant, least(j.weight, wanted.wcap) AS weight
            FROM jobs j
           WHERE j.queue = wanted.queue
             -- queued, due, and a payload version this worker knows (inlined: migrations/functions/)
             AND skiplock_claimable(j.status, j.run_at, j.version, wanted.version)
             -- a keyed job only while its key has no running job and no other claim holds it
             AND (j.lock_key IS NULL OR skiplock_key_free(j.lock_key))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT wanted.allow
             FOR UPDATE SKIP LOCKED
      ) c
     WHERE wanted.allow > 0
), tenant_hops AS (
    -- tenants: how many the walk found in the queue, each of whom gets an equal share of the claim
    SELECT w.queue, h.tenant, count(*) OVER (PARTITION BY w.queue) AS tenants
      FROM wanted w
      -- 256: the most tenants of one queue one claim looks at; the worker's cursor rotates past them
      CROSS JOIN LATERAL skiplock_tenant_hops(w.queue, w.tenant_after, 256) AS h(tenant)
     WHERE w.allow > 0
), by_tenant AS (
    SELECT c.*, w.lease, w.budget, w.tenant_cap
      FROM tenant_hops h
      JOIN wanted w ON w.queue = h.queue
      CROSS JOIN LATERAL (
          SELECT j.id, j.queue, j.priority, j.run_at, j.lock_key, j.tenant, least(j.weight, w.wcap) AS weight
            FROM jobs j
           WHERE j.queue = h.queue AND j.tenant = h.tenant
             AND skiplock_claimable(j.status, j.run_at, j.version, w.version)
             -- a keyed job only while its key has no running job and no other claim holds it
             AND (j.lock_key IS NULL OR skiplock_key_free(j.lock_key))
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT ceil(w.allow::float8 / h.tenants)::int
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
    -- turn: the job's place among its tenant's; tenant_used: the weight of its tenant up to it
    SELECT k.*, row_number() OVER t AS turn, sum(k.weight) OVER t AS tenant_used
      FROM one_per_key k
     WHERE k.lock_key IS NULL OR k.key_rank = 1
    WINDOW t AS (PARTITION BY k.queue, k.tenant ORDER BY k.priority DESC, k.run_at, k.id)
), caps AS MATERIALIZED (
    -- the per-tenant allowances of the limited queues this claim locked (after the locks, like theirs)
    SELECT * FROM skiplock_tenant_allowances(ARRAY(SELECT queue FROM allowances))
     WHERE cardinality(%(limited)s::text[]) > 0
), plain AS (
    -- whether the plain order is the answer (see picked); computed once, read by both branches
    SELECT NOT EXISTS (SELECT 1 FROM by_tenant)
           AND NOT EXISTS (SELECT 1 FROM head k WHERE k.lock_key IS NOT NULL OR k.weight > 1)
           AS yes
), picked AS (
    -- Two branches, each behind a one-time filter, so only one runs. Without tenant jobs, keyed
    -- candidates or weights that count (the common case) the plain order is the answer: none of the
    -- window functions' sorts, a large part of a plain claim's time. The other keeps each tenant
    -- within its allowance, then each queue within its budget: a tenant at its limit is passed
    -- over, and the next tenants' jobs fill the claim.
    (SELECT h.id, h.lease, 1::bigint AS turn
       FROM head h
      WHERE (SELECT yes FROM plain)
      ORDER BY h.priority DESC, h.run_at, h.id
      LIMIT %(limit)s)
    UNION ALL
    (SELECT q.id, q.lease, q.turn
       FROM (SELECT r.*, sum(r.weight) OVER (PARTITION BY r.queue ORDER BY r.turn, r.priority DESC, r.run_at, r.id)
                         AS used
               FROM ranked r
               LEFT JOIN caps c ON c.queue = r.queue AND c.tenant = r.tenant
              WHERE r.tenant IS NULL OR r.tenant_used <= coalesce(c.allow, r.tenant_cap, r.tenant_used)) q
      WHERE q.used <= q.budget AND NOT (SELECT yes FROM plain)
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
              j.version, j.tenant, j.priority, j.run_at, j.created_at, j.started_at, j.unique_key, j.weight
), spent AS (
    -- rate-limited queues' token buckets, the queue's and its tenants': refilled for the time since,
    -- less the weight claimed now
    UPDATE queue_limits l
       SET (tokens, tenant_tokens) = (SELECT * FROM skiplock_spend_tokens(l, c.tenants, c.weights)),
           refilled_at = now()
      FROM (SELECT queue, array_agg(tenant) AS tenants, array_agg(weight) AS weights FROM claimed GROUP BY queue) c
     WHERE l.queue = c.queue AND (l.rate IS NOT NULL OR l.tenant_rate IS NOT NULL)
       AND l.queue IN (SELECT queue FROM allowances)
)
SELECT id, queue, payload, attempts, max_attempts, version, tenant
  FROM claimed
 ORDER BY turn, priority DESC, run_at, id

-- name: limits_of
-- The limits of the given queues: the worker's cache of which queues the claim must lock (%(limited)s).
SELECT queue, concurrency, rate, burst, tenant_rate, tenant_burst FROM queue_limits
 WHERE queue = ANY(%(queues)s::text[]) AND limited
