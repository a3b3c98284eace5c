-- The claim's spending of a limited queue's token buckets (migration 043). The current definition: edit it
-- here (migrations/README.md).
--
-- `l` is the queue's queue_limits row, locked by this claim (skiplock_limit_allowances); `tenants` and
-- `weights` are the jobs the claim just started (a NULL tenant for a job without one). Returns the row's
-- new (tokens, tenant_tokens): every bucket refilled for the time since l.refilled_at (the caller sets it
-- to now()), then less the weight started now. A tenant's bucket that is full again is dropped from the
-- map (missing means full), so the map holds only the tenants that spent recently.
--
-- writes jobs: no
CREATE OR REPLACE FUNCTION skiplock_spend_tokens(l queue_limits, tenants text[], weights int[],
                                                 OUT tokens float8, OUT tenant_tokens jsonb)
LANGUAGE sql STABLE AS $$
    WITH spent AS (
        -- each job counts its weight up to the queue's weight_cap, as in the claim's admission
        SELECT s.tenant, sum(least(s.weight, l.weight_cap)) AS w
          FROM unnest(tenants, weights) AS s(tenant, weight) GROUP BY s.tenant
    ), elapsed AS (
        SELECT extract(epoch FROM now() - l.refilled_at) AS dt
    ), buckets AS (
        SELECT b.tenant,
               least(l.tenant_burst, b.level + l.tenant_rate * (SELECT dt FROM elapsed))
                 - coalesce((SELECT s.w FROM spent s WHERE s.tenant = b.tenant), 0) AS level
          FROM (SELECT e.key AS tenant, e.value::float8 AS level FROM jsonb_each_text(l.tenant_tokens) e
                UNION ALL
                -- a tenant not in the map spends from a full bucket
                SELECT s.tenant, l.tenant_burst FROM spent s
                 WHERE s.tenant IS NOT NULL AND NOT (l.tenant_tokens ? s.tenant)) b
    )
    SELECT CASE WHEN l.rate IS NULL THEN l.tokens
                ELSE least(l.burst, l.tokens + l.rate * (SELECT dt FROM elapsed)) - (SELECT sum(w) FROM spent) END,
           CASE WHEN l.tenant_rate IS NULL THEN '{}'::jsonb
                ELSE coalesce((SELECT jsonb_object_agg(b.tenant, b.level) FROM buckets b WHERE b.level < l.tenant_burst),
                              '{}'::jsonb) END
$$;
