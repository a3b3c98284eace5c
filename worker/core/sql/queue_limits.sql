-- queue_limits: the global and per-tenant limits of a queue (worker/core/features/limits.py). The claim
-- enforces them (jobs_claim.sql); these statements set, clear and list them. A row with neither kind of
-- limit (`limited` false, a generated column) limits nothing, and the claim ignores it.

-- name: upsert_global
-- Set (replace) a queue's global limits, keeping its per-tenant ones; the bucket starts full.
INSERT INTO queue_limits AS l (queue, concurrency, rate, burst, tokens, refilled_at, updated_by)
VALUES (%(queue)s, %(concurrency)s::int, %(rate)s::float8, %(burst)s::float8, coalesce(%(burst)s::float8, 0), now(),
        %(actor)s)
ON CONFLICT (queue) DO UPDATE
   SET concurrency = EXCLUDED.concurrency, rate = EXCLUDED.rate, burst = EXCLUDED.burst,
       tokens = least(coalesce(EXCLUDED.burst, 0), l.tokens), updated_at = now(), updated_by = EXCLUDED.updated_by
RETURNING queue

-- name: upsert_per_tenant
-- Set (replace) a queue's per-tenant limits, keeping its global ones. The tenants' buckets are kept
-- (each at most the new burst when next spent); with no per-tenant rate they are emptied.
INSERT INTO queue_limits AS l (queue, tenant_concurrency, tenant_rate, tenant_burst, updated_by)
VALUES (%(queue)s, %(concurrency)s::int, %(rate)s::float8, %(burst)s::float8, %(actor)s)
ON CONFLICT (queue) DO UPDATE
   SET tenant_concurrency = EXCLUDED.tenant_concurrency, tenant_rate = EXCLUDED.tenant_rate,
       tenant_burst = EXCLUDED.tenant_burst,
       tenant_tokens = CASE WHEN EXCLUDED.tenant_rate IS NULL THEN '{}'::jsonb ELSE l.tenant_tokens END,
       updated_at = now(), updated_by = EXCLUDED.updated_by
RETURNING queue

-- name: drop_if_unlimited
-- A queue whose last limit was just removed keeps no row: "remove the limits" of a queue that had none
-- writes nothing, and the claim's limited-queue path is not taken for it.
DELETE FROM queue_limits
 WHERE queue = %(queue)s AND concurrency IS NULL AND rate IS NULL
   AND tenant_concurrency IS NULL AND tenant_rate IS NULL

-- name: delete_limits
-- Remove every limit of a queue, global and per-tenant; a row back when it had some.
DELETE FROM queue_limits WHERE queue = %(queue)s RETURNING limited

-- name: list_limits
-- Every limited queue, with the running weight now (what the CLI, the console and /metrics show).
SELECT l.queue, l.concurrency, l.rate, l.burst, l.updated_at, l.updated_by,
       (SELECT coalesce(sum(least(r.weight, l.weight_cap)), 0) FROM jobs r
         WHERE r.status = 'running' AND r.queue = l.queue) AS running,
       l.tenant_concurrency, l.tenant_rate, l.tenant_burst
  FROM queue_limits l
 WHERE l.limited
 ORDER BY l.queue

-- name: tenants_at_limit
-- The tenants of one queue that hold some of its per-tenant limits now: each one's running weight and
-- what it may still start (skiplock_tenant_allowances; a read, without the claim's row lock, so it can
-- be a claim behind). Those at 0 are at their limit. The busiest first, at most %(limit)s.
SELECT a.tenant, (SELECT coalesce(sum(least(r.weight, l.weight_cap)), 0) FROM jobs r
                   WHERE r.status = 'running' AND r.queue = a.queue AND r.tenant = a.tenant) AS running,
       a.allow
  FROM skiplock_tenant_allowances(ARRAY[%(queue)s::text]) a
  JOIN queue_limits l ON l.queue = a.queue
 ORDER BY a.allow, running DESC, a.tenant
 LIMIT %(limit)s
