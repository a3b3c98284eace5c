-- The claim's per-tenant limits (migration 043). The current definition: edit it here (migrations/README.md).
--
-- For each of `p_queues` that has per-tenant limits, each tenant that holds some of them now: the weight
-- it may still start, the lesser of what its concurrency limit leaves (the sum of its running jobs'
-- weights taken off, each at most the queue's weight_cap) and its token bucket (tenant_tokens, refilled for the time since). A tenant of the
-- queue not listed holds nothing: the claim gives it the whole per-tenant limit.
--
-- The claim calls it only with the queues whose queue_limits rows skiplock_limit_allowances locked in the
-- same statement, so no other claim of those queues runs meanwhile; VOLATILE and in PL/pgSQL, its query
-- takes a snapshot after those locks, in which every earlier claim of the queue has committed. That is
-- what keeps a tenant under its limit across any number of workers: the claims of one limited queue are
-- serialized, and each counts what the previous ones started.
--
-- Only tenants with running jobs or a bucket that is not full are read: the running jobs of the queue
-- (jobs_running_idx; bounded by the workers' slots) and the keys of tenant_tokens.
--
-- writes jobs: no
CREATE OR REPLACE FUNCTION skiplock_tenant_allowances(p_queues text[])
RETURNS TABLE (queue text, tenant text, allow int)
LANGUAGE plpgsql VOLATILE
SET enable_bitmapscan = off
AS $$
BEGIN
    RETURN QUERY
    SELECT l.queue, t.tenant,
           greatest(0, coalesce(least(
               l.tenant_concurrency - t.used,
               floor(least(l.tenant_burst, (l.tenant_tokens ->> t.tenant)::float8
                                           + l.tenant_rate * extract(epoch FROM now() - l.refilled_at)))::int),
               2147483647))
      FROM queue_limits l
      CROSS JOIN LATERAL (
          SELECT h.tenant, sum(h.weight)::int AS used
            FROM (SELECT r.tenant, least(r.weight, l.weight_cap) AS weight FROM jobs r
                   WHERE r.status = 'running' AND r.queue = l.queue AND r.tenant IS NOT NULL
                  UNION ALL
                  SELECT k.key, 0 FROM jsonb_object_keys(l.tenant_tokens) AS k(key)) h
           GROUP BY h.tenant
      ) t
     WHERE l.queue = ANY(p_queues) AND (l.tenant_concurrency IS NOT NULL OR l.tenant_rate IS NOT NULL);
END
$$;
