-- The claim's global limits (issue 15; first in 018). The current definition: edit it here (migrations/README.md).
--
-- Global limits decided inside the claim statement (issue 15).
--
-- Before: a claim that included a limited queue ran in a transaction of its own, BEGIN, a
-- SELECT ... FOR UPDATE SKIP LOCKED of the queue_limits rows, the claim, COMMIT: four round trips
-- instead of one for every claim of a worker that also serves a limited queue, which cost the
-- unlimited queues beside it ~15 percent of their claim rate.
--
-- Now the claim calls this function once. It is VOLATILE and in PL/pgSQL, so each statement in it
-- takes a fresh snapshot (READ COMMITTED): the first locks the limited queues' rows (SKIP LOCKED:
-- a queue another claimer is claiming right now is left to it for this turn, so no claim waits
-- behind a limited queue); the second, whose snapshot is taken after those locks, counts the
-- queue's running jobs and reads its token bucket, so every earlier claim of the queue (which
-- held the lock until it committed) is counted and two claimers never both take the last slot.
-- The locks are held to the end of the claim's transaction, which spends the tokens.
--
-- Plain index scans, not bitmap ones: a bitmap scan neither uses nor sets the index's dead-entry
-- hints, so between vacuums it also visits every job that has run since the last one (20,287
-- entries, 5 ms after one 20,000-job drain, measured); enable_bitmapscan = off for this function.
--
-- Weights (migration 043): a running job holds its `weight` of the concurrency limit, up to the
-- queue's weight_cap (its smallest limit), so the count is the sum of those. A row with only per-tenant limits (`limited`) is locked too:
-- the same lock serializes its per-tenant counts (skiplock_tenant_allowances). `allow` is a weight
-- budget, at most p_limit; a NULL p_limit bounds it only by the limits (2147483647 when there are none).
--
-- writes jobs: no
CREATE OR REPLACE FUNCTION skiplock_limit_allowances(p_queues text[], p_limit int)
RETURNS TABLE (queue text, allow int)
LANGUAGE plpgsql VOLATILE
SET enable_bitmapscan = off
AS $$
DECLARE
    held text[];
BEGIN
    SELECT coalesce(array_agg(k.queue), '{}') INTO held
      FROM (SELECT l.queue FROM queue_limits l
             WHERE l.queue = ANY(p_queues) AND l.limited
             ORDER BY l.queue
               FOR UPDATE SKIP LOCKED) k;
    RETURN QUERY
    SELECT l.queue,
           greatest(0, coalesce(least(
               p_limit,
               l.concurrency - (SELECT coalesce(sum(least(r.weight, l.weight_cap)), 0) FROM jobs r
                                 WHERE r.status = 'running' AND r.queue = l.queue)::int,
               floor(least(l.burst, l.tokens + l.rate * extract(epoch FROM now() - l.refilled_at)))::int),
               2147483647))
      FROM queue_limits l
     WHERE l.queue = ANY(held);
END
$$;
