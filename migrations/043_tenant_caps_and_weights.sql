-- 043: per-tenant limits and job weights (worker/core/features/limits.py). Safe to re-run.
--
-- jobs.weight: how much of a concurrency or rate limit one job takes (enqueue(..., weight=5)). A
-- constant default, so adding it does not rewrite jobs, and SQL producers that leave it out get 1.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS weight int NOT NULL DEFAULT 1;

DO $$
BEGIN
    ALTER TABLE jobs ADD CONSTRAINT jobs_weight_positive CHECK (weight >= 1);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

-- Per-tenant limits of a queue, on top of its global ones: each tenant of the queue has at most
-- tenant_concurrency weight running, and starts at most tenant_rate weight per second (a token bucket
-- per tenant, of size tenant_burst). Jobs without a tenant are held only by the global limits.
ALTER TABLE queue_limits ADD COLUMN IF NOT EXISTS tenant_concurrency int
    CHECK (tenant_concurrency IS NULL OR tenant_concurrency >= 1);
ALTER TABLE queue_limits ADD COLUMN IF NOT EXISTS tenant_rate float8 CHECK (tenant_rate IS NULL OR tenant_rate > 0);
ALTER TABLE queue_limits ADD COLUMN IF NOT EXISTS tenant_burst float8 CHECK (tenant_burst IS NULL OR tenant_burst >= 1);
-- The token buckets of the tenants that spent some recently, {"acme": 2.5}: each one's tokens as of
-- refilled_at (the queue's own bucket's time). A tenant missing from it has a full bucket; the claim
-- that spends drops the buckets that are full again, so the map holds only the recently busy tenants.
ALTER TABLE queue_limits ADD COLUMN IF NOT EXISTS tenant_tokens jsonb NOT NULL DEFAULT '{}';
-- Whether the row limits anything: the claim locks (and so serializes the claims of) exactly these queues.
ALTER TABLE queue_limits ADD COLUMN IF NOT EXISTS limited boolean GENERATED ALWAYS AS (
    concurrency IS NOT NULL OR rate IS NOT NULL OR tenant_concurrency IS NOT NULL OR tenant_rate IS NOT NULL) STORED;
-- The most one job counts toward the queue's limits (admitted, held while running, spent from a bucket):
-- the size of the smallest one. A job heavier than that counts as that size, so it runs alone instead
-- of never. (With a rate, a burst below the heaviest weight flattens the heavier jobs to it.)
ALTER TABLE queue_limits ADD COLUMN IF NOT EXISTS weight_cap int GENERATED ALWAYS AS (
    least(concurrency, floor(burst)::int, tenant_concurrency, floor(tenant_burst)::int)) STORED;
-- A tenant's allowance while it holds nothing: its whole concurrency limit or full bucket, the lesser.
ALTER TABLE queue_limits ADD COLUMN IF NOT EXISTS tenant_cap int GENERATED ALWAYS AS (
    least(tenant_concurrency, floor(tenant_burst)::int)) STORED;
